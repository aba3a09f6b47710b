package storetest

import (
	"errors"

	"github.com/molt-dev/molt/internal/work"
)

func isCondFailed(err error) bool {
	var cf *work.ConditionFailed
	return errors.As(err, &cf)
}

func asCondFailed(err error, out **work.ConditionFailed) bool { return errors.As(err, out) }
