package molt

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// DecodeStrict decodes one JSON value into v, refusing unknown fields and trailing
// data. Errors are EINVALID and name the offending field where JSON tells it.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr):
			return Invalid(typeErr.Field, "%s must be %s", typeErr.Field, typeErr.Type.String())
		case errors.Is(err, io.EOF):
			return Invalid("body", "empty body")
		default:
			return Invalid(unknownField(err.Error()), "malformed JSON: %s", err.Error())
		}
	}
	if dec.More() {
		return Invalid("body", "trailing data after the JSON value")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return Invalid("body", "trailing data after the JSON value")
	}
	return nil
}

// unknownField extracts the name from encoding/json's `json: unknown field "x"`.
func unknownField(msg string) string {
	const p = `json: unknown field "`
	if i := bytes.Index([]byte(msg), []byte(p)); i >= 0 {
		rest := msg[i+len(p):]
		if j := bytes.IndexByte([]byte(rest), '"'); j >= 0 {
			return rest[:j]
		}
	}
	return "body"
}
