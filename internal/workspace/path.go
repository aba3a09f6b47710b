package workspace

import (
	"regexp"
	"strings"

	"github.com/molt-dev/molt/internal/molt"
)

// Top-level names of a prompt surface.
var (
	topFiles   = map[string]bool{"INSTRUCTIONS.md": true, "INDEX.md": true, "USER.md": true}
	topFolders = map[string]bool{"agents": true, "skills": true, "prompts": true}
	promptKind = map[string]bool{"bootstrap": true, "all": true, "root": true}
	segmentRe  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$`)
)

// ValidatePath returns EINVALID (field "path") unless p is a path inside a prompt
// surface: relative, slash-separated, no empty, "." or ".." segments, no
// backslashes or control characters, under a known top-level name:
//
//	INSTRUCTIONS.md, INDEX.md, USER.md
//	agents/<id>/<file…>
//	skills/<id>/<file…>
//	prompts/{bootstrap,all,root}/<name>.md
func ValidatePath(p string) error {
	bad := func(why string) error { return molt.Invalid("path", "path %q %s", p, why) }
	switch {
	case p == "":
		return molt.Invalid("path", "path is empty")
	case len(p) > MaxPathLen:
		return bad("is too long")
	case strings.HasPrefix(p, "/"):
		return bad("must be relative")
	case strings.ContainsAny(p, "\\\x00"):
		return bad("contains a forbidden character")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return bad("contains a control character")
		}
	}
	segs := strings.Split(p, "/")
	for _, s := range segs {
		switch s {
		case "":
			return bad("has an empty segment")
		case ".", "..":
			return bad("escapes the surface")
		}
		if !segmentRe.MatchString(s) {
			return bad("has an invalid name " + quote(s))
		}
	}
	top := segs[0]
	if len(segs) == 1 {
		if topFiles[top] {
			return nil
		}
		return bad("is not a known top-level file")
	}
	if !topFolders[top] {
		return bad("is not under a known top-level folder")
	}
	switch top {
	case "prompts":
		if len(segs) != 3 || !promptKind[segs[1]] || !strings.HasSuffix(segs[2], ".md") {
			return bad("must be prompts/{bootstrap,all,root}/<name>.md")
		}
	case "agents", "skills":
		if len(segs) < 3 {
			return bad("must name a file inside " + top + "/<id>/")
		}
		if len(segs) > 6 {
			return bad("is nested too deeply")
		}
	}
	return nil
}

func quote(s string) string { return "\"" + s + "\"" }

// Folder returns the override unit a path belongs to: "agents/<id>", "skills/<id>",
// "prompts/<kind>", or "" for a top-level file (which overrides by itself).
func Folder(p string) string {
	segs := strings.SplitN(p, "/", 3)
	if len(segs) < 3 {
		return ""
	}
	return segs[0] + "/" + segs[1]
}
