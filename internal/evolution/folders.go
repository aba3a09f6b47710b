package evolution

import "github.com/molt-dev/molt/internal/workspace"

// FolderCopies returns the files that must be written to the workspace along
// with the paths in written so that writing them hides nothing (a workspace
// folder agents/<id>/, skills/<id>/ or prompts/<kind>/ replaces the
// lower folder of that name as a whole). For each such folder a written path
// falls in that holds no workspace file yet, every other file of the folder on
// live (the effective surface: global, else built-in, files there) is returned
// with its content, by path; paths in written are never returned. Publishing
// the copies with the written files keeps every other file of the folder
// visible with the same bytes: a byte-equal copy is no change (Classify), so
// they never change a run's category. A folder the workspace already overrides
// needs no copy, and neither does a top-level file. It is a pure function.
func FolderCopies(live []workspace.EffectiveFile, written []string) map[string][]byte {
	own := map[string]bool{}
	for _, f := range live {
		if d := workspace.Folder(f.Path); d != "" && f.Scope == workspace.ScopeWorkspace {
			own[d] = true
		}
	}
	writes := map[string]bool{}
	created := map[string]bool{}
	for _, p := range written {
		writes[p] = true
		if d := workspace.Folder(p); d != "" && !own[d] {
			created[d] = true
		}
	}
	out := map[string][]byte{}
	for _, f := range live {
		if d := workspace.Folder(f.Path); d != "" && created[d] && !writes[f.Path] {
			out[f.Path] = f.Content
		}
	}
	return out
}
