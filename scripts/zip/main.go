// Command zip writes a Lambda deployment package without needing the zip tool:
//
//	go run ./scripts/zip -o build/api.zip build/api/bootstrap
//
// Each file is stored at the root of the archive under its base name. A file named
// bootstrap, or executable on disk, gets mode 0755 (Lambda refuses a bootstrap
// without the executable bit). Timestamps are fixed, so the same binary always gives
// the same archive and `sam deploy` sees no change where there is none.
package main

import (
	"archive/zip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// epoch is the modification time written for every entry (the zip format's minimum).
var epoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

func main() {
	out := flag.String("o", "", "archive to write")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: zip -o OUT.zip FILE...")
		os.Exit(2)
	}
	if err := write(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "zip:", err)
		os.Exit(1)
	}
}

// write creates out atomically (temp file + rename) holding files.
func write(out string, files []string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".zip-*")
	if err != nil {
		return fmt.Errorf("create temp archive: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	zw := zip.NewWriter(tmp)
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		if seen[name] {
			return fmt.Errorf("add %s: two files named %s", f, name)
		}
		seen[name] = true
		if err := add(zw, f, name); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("finish archive: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close archive: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("chmod archive: %w", err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return fmt.Errorf("rename archive: %w", err)
	}
	return nil
}

// add copies file f into zw as name.
func add(zw *zip.Writer, f, name string) error {
	src, err := os.Open(f)
	if err != nil {
		return fmt.Errorf("open %s: %w", f, err)
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", f, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("add %s: %w", f, errors.New("not a regular file"))
	}
	mode := os.FileMode(0o644)
	if name == "bootstrap" || st.Mode()&0o111 != 0 {
		mode = 0o755
	}
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: epoch}
	h.SetMode(mode)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return fmt.Errorf("add %s: %w", f, err)
	}
	if _, err := io.Copy(w, src); err != nil {
		return fmt.Errorf("compress %s: %w", f, err)
	}
	return nil
}
