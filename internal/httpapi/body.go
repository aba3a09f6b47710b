package httpapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

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
