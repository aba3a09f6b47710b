package supervisor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/molt-dev/molt/internal/a2a"
)

// maxBody bounds what is read of a remote's answer.
const maxBody = 1 << 20

// errUnknown marks a call whose outcome is unknown: the request may have
// reached the remote and its answer was lost (a timeout, a broken connection,
// a 5xx from something in front of it).
var errUnknown = errors.New("outcome unknown")

// rpcError is a JSON-RPC error answer: the remote refused, changing nothing.
type rpcError struct{ Code int }

func (e *rpcError) Error() string { return fmt.Sprintf("rpc_%d", e.Code) }

// reason is a safe reason for err (what may be shown and stored).
func reason(err error) string {
	var re *rpcError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &re):
		return re.Error()
	case errors.Is(err, errUnknown):
		return "no_answer"
	}
	var he *httpError
	if errors.As(err, &he) {
		return fmt.Sprintf("http_%d", he.Status)
	}
	return "unreachable"
}

type httpError struct{ Status int }

func (e *httpError) Error() string { return fmt.Sprintf("http_%d", e.Status) }

// remote calls one remote agent with its token. The token lives only here,
// for the pass.
type remote struct {
	http     *http.Client
	endpoint string
	token    string
}

// call sends one JSON-RPC request; ext activates the campaign-control
// extension. A transport failure after the request may have been sent, or a
// 5xx, is errUnknown; a JSON-RPC error is *rpcError.
func (r remote) call(ctx context.Context, method string, ext bool, params, result any) error {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	if ext {
		req.Header.Set("A2A-Extensions", a2a.ExtCampaign)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", method, errors.Join(errUnknown, err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("%s: %w", method, errors.Join(errUnknown, err))
	}
	if resp.StatusCode >= 500 {
		return fmt.Errorf("%s: %w", method, errors.Join(errUnknown, &httpError{Status: resp.StatusCode}))
	}
	if resp.StatusCode != http.StatusOK {
		return &httpError{Status: resp.StatusCode}
	}
	var out struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return fmt.Errorf("%s: bad response: %w", method, err)
	}
	if out.Error != nil {
		return &rpcError{Code: out.Error.Code}
	}
	if result == nil {
		return nil
	}
	return json.Unmarshal(out.Result, result)
}

// requiredMethods are the extension's methods control needs, by what they give.
var requiredMethods = []struct{ method, gives string }{
	{"campaign/claim", "lease/epoch"}, {"campaign/renew", "lease/epoch"}, {"campaign/release", "lease/epoch"},
	{"campaign/get", "readback"}, {"campaign/getRequest", "request-id readback"},
}

// discover reads the card at cardURL: its JSON-RPC 1.0 endpoint and whether
// it advertises what control needs. A generic skill description never grants
// control: only the extension's own entry does.
func discover(ctx context.Context, hc *http.Client, cardURL string) (Capabilities, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cardURL, nil)
	if err != nil {
		return Capabilities{}, &httpError{Status: 0}
	}
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return Capabilities{}, errors.Join(errUnknown, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return Capabilities{}, errors.Join(errUnknown, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Capabilities{}, &httpError{Status: resp.StatusCode}
	}
	var card struct {
		URL        string `json:"url"`
		Interfaces []struct {
			URL      string `json:"url"`
			Binding  string `json:"protocolBinding"`
			Protocol string `json:"protocolVersion"`
		} `json:"supportedInterfaces"`
		Capabilities struct {
			Extensions []struct {
				URI    string `json:"uri"`
				Params struct {
					Methods       []string       `json:"methods"`
					ControlWrites []string       `json:"controlWrites"`
					Policy        map[string]any `json:"policy"`
				} `json:"params"`
			} `json:"extensions"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(body, &card); err != nil {
		return Capabilities{}, &httpError{Status: 0}
	}
	sum := sha256.Sum256(body)
	caps := Capabilities{CardSum: hex.EncodeToString(sum[:8])}
	for _, i := range card.Interfaces {
		if strings.EqualFold(i.Binding, "JSONRPC") && strings.HasPrefix(i.Protocol, "1") && i.URL != "" {
			caps.Endpoint = i.URL
			break
		}
	}
	if caps.Endpoint == "" {
		caps.Endpoint = card.URL
	}
	if caps.Endpoint == "" {
		return Capabilities{}, &httpError{Status: 0}
	}
	found := false
	for _, e := range card.Capabilities.Extensions {
		if e.URI != a2a.ExtCampaign {
			continue
		}
		found = true
		for _, m := range requiredMethods {
			if !slices.Contains(e.Params.Methods, m.method) && !slices.Contains(caps.Missing, m.gives) {
				caps.Missing = append(caps.Missing, m.gives)
			}
		}
		if !slices.Contains(e.Params.ControlWrites, "SendMessage") || !slices.Contains(e.Params.ControlWrites, "CancelTask") {
			caps.Missing = append(caps.Missing, "control writes")
		}
		if _, ok := e.Params.Policy["access"]; !ok {
			caps.Missing = append(caps.Missing, "policy enforcement")
		} else if _, ok := e.Params.Policy["autoApply"]; !ok {
			caps.Missing = append(caps.Missing, "policy enforcement")
		}
	}
	if !found {
		caps.Missing = []string{"the campaign-control extension (" + a2a.ExtCampaign + ")"}
	}
	caps.Control = len(caps.Missing) == 0
	return caps, nil
}
