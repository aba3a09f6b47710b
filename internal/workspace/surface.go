package workspace

import "sort"

// Scopes of an effective file.
const (
	ScopeWorkspace = "workspace"
	ScopeGlobal    = "global"
	ScopeBuiltin   = "builtin"
)

// EffectiveFile is a file of the effective surface with the scope it came from.
type EffectiveFile struct {
	File
	Scope string `json:"scope"`
}

// Effective returns the surface an agent of the workspace sees: every global file,
// except that a workspace file replaces the global file of the same path, and a
// workspace folder agents/<id>/, skills/<id>/ or prompts/<kind>/ replaces the global
// folder of that name as a whole. The result is sorted by path.
func Effective(global, ws []File) []EffectiveFile {
	wsFolders := map[string]bool{}
	wsPaths := map[string]bool{}
	for _, f := range ws {
		wsPaths[f.Path] = true
		if d := Folder(f.Path); d != "" {
			wsFolders[d] = true
		}
	}
	out := make([]EffectiveFile, 0, len(global)+len(ws))
	for _, f := range global {
		if wsPaths[f.Path] {
			continue
		}
		if d := Folder(f.Path); d != "" && wsFolders[d] {
			continue
		}
		out = append(out, EffectiveFile{File: f, Scope: ScopeGlobal})
	}
	for _, f := range ws {
		out = append(out, EffectiveFile{File: f, Scope: ScopeWorkspace})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
