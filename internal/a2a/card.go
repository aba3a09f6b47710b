package a2a

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/workspace"
)

// agentInfo is what a card shows of an agent: its name and description
// from agent.yaml, nothing else of the surface.
type agentInfo struct{ name, description string }

// agent reads ref's agent.yaml; false when the workspace or agent is absent.
func (h *Handler) agent(ctx context.Context, ref agentRef) (agentInfo, bool) {
	if workspace.ValidateName(ref.ws) != nil || ref.ws == workspace.Global || session.ValidateAgent(ref.agent) != nil {
		return agentInfo{}, false
	}
	if _, err := h.store.GetWorkspace(ctx, ref.ws); err != nil {
		return agentInfo{}, false
	}
	sf, err := h.surfac.Read(ctx, ref.ws)
	if err != nil {
		return agentInfo{}, false
	}
	dir := "agents/" + ref.agent + "/"
	info, found := agentInfo{name: ref.agent}, false
	for _, f := range sf.Effective() {
		if !strings.HasPrefix(f.Path, dir) {
			continue
		}
		found = true
		if f.Path == dir+"agent.yaml" {
			if a, err := chat.ParseAgent(f.Path, f.Content); err == nil {
				if a.Name != "" {
					info.name = a.Name
				}
				info.description = a.Description
			}
		}
	}
	return info, found
}

func (h *Handler) agentExists(ctx context.Context, ref agentRef) bool {
	_, ok := h.agent(ctx, ref)
	return ok
}

// baseURL is the agent's JSON-RPC URL as the client reached it.
func baseURL(r *http.Request, ref agentRef) string {
	scheme := "http"
	// r.URL.Scheme is set by lambdaurl (a function URL is https only).
	if r.TLS != nil || r.URL.Scheme == "https" || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/a2a/" + ref.ws + "/" + ref.agent
}

// Card serves GET /a2a/{ws}/{agent}/.well-known/agent-card.json: public,
// 404 for an unknown workspace or agent.
func (h *Handler) Card(w http.ResponseWriter, r *http.Request) {
	h.serveCard(w, r, h.ref(r))
}

// WorkspaceCard serves GET /a2a/{ws}/.well-known/agent-card.json: the card
// of the workspace's default agent, main. It is where a client that
// resolves the relative ".well-known/agent-card.json" against the base URL
// (as @a2a-js/sdk does: the base's last segment is replaced) lands from
// {api}/a2a/{ws}/main; another agent's base must then end in "/".
func (h *Handler) WorkspaceCard(w http.ResponseWriter, r *http.Request) {
	h.serveCard(w, r, agentRef{ws: r.PathValue("ws"), agent: DefaultAgent})
}

// DefaultAgent is the agent a workspace's own card describes.
const DefaultAgent = "main"

// RootCard serves GET /.well-known/agent-card.json: the card of the agent
// the setting a2a.default_agent names ("ws/agent"); 404 when it is unset.
func (h *Handler) RootCard(w http.ResponseWriter, r *http.Request) {
	s, err := h.store.GetSettings(r.Context())
	ws, agent, ok := strings.Cut(s.A2A.DefaultAgent, "/")
	if err != nil || !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no default A2A agent is set (setting a2a.default_agent)"})
		return
	}
	h.serveCard(w, r, agentRef{ws: ws, agent: agent})
}

// blockingNote ends every card's description: how long a blocking send waits.
const blockingNote = " Blocking sends wait at most %s for the reply, then return the task still working: poll GetTask or subscribe on the streaming interface."

func (h *Handler) serveCard(w http.ResponseWriter, r *http.Request, ref agentRef) {
	info, ok := h.agent(r.Context(), ref)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such agent"})
		return
	}
	url := baseURL(r, ref)
	desc := info.description
	if desc == "" {
		desc = "molt agent " + ref.agent + " of workspace " + ref.ws + "."
	}
	desc = strings.TrimSpace(desc) + strings.Replace(blockingNote, "%s", h.cfg.BlockWait.String(), 1)
	streamURL := ""
	switch {
	case h.cfg.StreamURL != "":
		streamURL = strings.TrimRight(h.cfg.StreamURL, "/") + "/a2a/" + ref.ws + "/" + ref.agent
	case h.cfg.Streaming:
		streamURL = url
	}
	// Where this endpoint cannot stream (API Gateway) but the streaming
	// function URL exists, that URL comes first: it serves every method, and
	// a client that reads only the primary URL (v0.3's url) streams there.
	primary, other := url, streamURL
	if !h.cfg.Streaming && streamURL != "" {
		primary, other = streamURL, url
	}
	ifaces := []any{
		map[string]any{"url": primary, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
		map[string]any{"url": primary, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
	}
	if other != "" && other != primary {
		ifaces = append(ifaces,
			map[string]any{"url": other, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
			map[string]any{"url": other, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"})
	}
	bearer := map[string]any{"httpAuthSecurityScheme": map[string]any{"scheme": "Bearer",
		"description": "a molt token: full, or a workspace token of this workspace (readonly may only read tasks)"}}
	card := map[string]any{
		"name":                info.name,
		"description":         desc,
		"version":             "1.0.0",
		"supportedInterfaces": ifaces,
		"capabilities": map[string]any{"streaming": streamURL != "", "pushNotifications": false,
			"extendedAgentCard": false, "extensions": h.extensions()},
		"defaultInputModes":  []string{"text/plain"},
		"defaultOutputModes": []string{"text/plain"},
		"skills": []any{map[string]any{"id": ref.agent, "name": info.name, "description": desc,
			"tags": []string{"chat"}}},
		"securitySchemes":      map[string]any{"bearer": bearer},
		"securityRequirements": []any{map[string]any{"schemes": map[string]any{"bearer": map[string]any{"list": []string{}}}}},
	}
	if v := r.Header.Get("A2A-Version"); !strings.HasPrefix(strings.TrimSpace(v), "1") {
		// A v0.3 client (a2a-go v0.3.3) reads only these, and needs the scheme's
		// type; the v1.0 fields stay for clients that read both.
		card["url"], card["preferredTransport"], card["protocolVersion"] = primary, "JSONRPC", "0.3.0"
		bearer["type"], bearer["scheme"] = "http", "bearer"
		card["security"] = []any{map[string]any{"bearer": []string{}}}
		if other != "" && other != primary {
			card["additionalInterfaces"] = []any{map[string]any{"url": other, "transport": "JSONRPC"}}
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, card)
}

// extensions is the card's capabilities.extensions: the campaign-control
// extension with its methods and the policy terms molt enforces.
func (h *Handler) extensions() []any {
	if h.proto == nil {
		return []any{}
	}
	return []any{map[string]any{"uri": ExtCampaign, "required": false,
		"description": "Campaign control: a lease with an integer epoch per campaign, control writes fenced by it, " +
			"request-id readback and an enforced execution policy. Activate with the A2A-Extensions header.",
		"params": map[string]any{
			"methods":       campaignMethods,
			"controlWrites": []string{"SendMessage", "CancelTask"},
			"policy": map[string]any{"access": []string{"workspace"}, "allowEgress": []bool{false, true},
				"allowCrossWorkspace": []bool{false, true}, "autoApply": []bool{false}},
			"maxLeaseSeconds":      int(MaxLease / time.Second),
			"requestRetentionDays": int(RequestRetention / (24 * time.Hour)),
			"errors": map[string]int{"staleEpoch": codeStaleEpoch, "leaseExpired": codeLeaseExpired,
				"notController": codeNotController, "policyNotEnforceable": codePolicy, "campaignBusy": codeCampaignBusy,
				"leaseHeld": codeLeaseHeld, "campaignNotFound": codeNoCampaign, "requestIdReused": codeRequestReused,
				"extensionRequired": codeExtension},
		}}}
}
