package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/molt-dev/molt/internal/molt"
)

// readBody reads the whole body, at most limit bytes; ETOOLARGE beyond.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(limit)
		}
		return nil, &molt.Error{Code: molt.EINVALID, Field: "body", Message: "reading the request body failed", Err: err}
	}
	return b, nil
}

func tooLarge(limit int64) error {
	return &molt.Error{Code: molt.ETOOLARGE, Field: "body", Message: fmt.Sprintf("request body over %d bytes", limit)}
}

// readJSON reads a JSON body of at most s.maxBody bytes. A missing Content-Type is
// accepted, and so is application/x-www-form-urlencoded, what `curl -d` sends by
// default: the body must still be strict JSON, and bearer-token auth means a
// browser form cannot forge such a request. Any other type that is not JSON is
// 415. The raw bytes are returned for the caller to decode strictly
// (molt.DecodeStrict).
func (s *server) readJSON(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "application/x-www-form-urlencoded") {
			return nil, &molt.Error{Code: molt.EINVALID, Reason: reasonMediaType, Field: "Content-Type",
				Message: "the request body must be application/json"}
		}
	}
	return readBody(w, r, s.maxBody)
}

// decodeStrict decodes body into v (a pointer to a struct) like molt.DecodeStrict,
// after checkKeys.
func decodeStrict(body []byte, v any) error {
	if err := checkKeys(body, reflect.TypeOf(v)); err != nil {
		return err
	}
	return molt.DecodeStrict(body, v)
}

// checkKeys refuses what encoding/json quietly accepts in a body that is meant
// to be strict: a top-level value that is not an object (null among them, which
// would decode as {}), an object key given twice (the last would win, so two
// readers of one body could disagree), a key that names a field only
// case-insensitively ("Text" for "text"), and a string (key or value) that is
// not valid UTF-8 (encoding/json would store U+FFFD instead) or holds a NUL.
// Each is EINVALID naming the field. t is the type the body decodes into;
// objects nested in struct fields are checked against those fields' types.
// Malformed JSON passes: molt.DecodeStrict reports it.
func checkKeys(body []byte, t reflect.Type) error {
	if top := bytes.TrimLeft(body, " \t\r\n"); len(top) > 0 && top[0] != '{' {
		return molt.Invalid("body", "the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	err := (&keyWalker{dec: dec, body: body}).walk(t, "")
	var me *molt.Error
	if errors.As(err, &me) {
		return err
	}
	return nil
}

// keyWalker reads a body's JSON values with the raw bytes at hand.
type keyWalker struct {
	dec  *json.Decoder
	body []byte
}

// token reads the next token and checks it when it is a string; name is the
// field it belongs to.
func (k *keyWalker) token(name string) (json.Token, error) {
	start := k.dec.InputOffset()
	tok, err := k.dec.Token()
	if err != nil {
		return nil, err
	}
	if str, ok := tok.(string); ok {
		end := k.dec.InputOffset()
		if start >= 0 && end <= int64(len(k.body)) && start <= end && !utf8.Valid(k.body[start:end]) {
			return nil, molt.Invalid(name, "%s is not valid UTF-8", name)
		}
		if strings.ContainsRune(str, 0) {
			return nil, molt.Invalid(name, "%s contains a NUL character", name)
		}
	}
	return tok, nil
}

// walk reads one JSON value; t is its Go type (nil: unknown).
func (k *keyWalker) walk(t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	field := path
	if field == "" {
		field = "body"
	}
	tok, err := k.token(field)
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			fields = jsonFields(t)
		}
		var elem reflect.Type
		if t != nil && t.Kind() == reflect.Map {
			elem = t.Elem()
		}
		seen := map[string]bool{}
		for k.dec.More() {
			kt, err := k.token(field)
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			name := key
			if path != "" {
				name = path + "." + key
			}
			if seen[key] {
				return molt.Invalid(name, "%s is given twice", name)
			}
			seen[key] = true
			ft := elem
			if fields != nil {
				var ok bool
				if ft, ok = fields[key]; !ok {
					for f := range fields {
						if strings.EqualFold(f, key) {
							return molt.Invalid(name, "unknown field %q: keys are case-sensitive (%q)", key, f)
						}
					}
				}
			}
			if err := k.walk(ft, name); err != nil {
				return err
			}
		}
		_, err := k.dec.Token() // '}'
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for k.dec.More() {
			if err := k.walk(elem, path); err != nil {
				return err
			}
		}
		_, err := k.dec.Token() // ']'
		return err
	}
	return nil
}

// jsonFields maps the JSON names of struct t's fields (as encoding/json names
// them, embedded structs flattened) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	return out
}
