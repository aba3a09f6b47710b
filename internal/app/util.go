package app

import (
	"strings"

	"github.com/molt-dev/molt/internal/buildinfo"
)

func upper(s string) string { return strings.ToUpper(s) }

func versionString() string { return buildinfo.Version + " (" + buildinfo.SHA + ")" }
