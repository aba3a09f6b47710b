package app

import (
	"github.com/molt-dev/molt/internal/buildinfo"
)

func versionString() string { return buildinfo.Version + " (" + buildinfo.SHA + ")" }
