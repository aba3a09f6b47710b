package model_test

import (
	"context"
	"errors"
	"testing"

	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/molt"
)

func TestEstimateTokens(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int{"": 0, "a": 1, "abcd": 1, "abcde": 2, "12345678": 2} {
		if got := model.EstimateTokens(s); got != want {
			t.Errorf("EstimateTokens(%q) = %d; want %d", s, got, want)
		}
	}
}

func TestFailCodes(t *testing.T) {
	t.Parallel()
	for reason, code := range map[string]string{
		model.ReasonBadRequest: molt.EINVALID, model.ReasonAuth: molt.EINVALID,
		model.ReasonRateLimited: molt.EUNAVAILABLE, model.ReasonServerError: molt.EUNAVAILABLE,
		model.ReasonTimeout: molt.EUNAVAILABLE, model.ReasonNetwork: molt.EUNAVAILABLE,
		model.ReasonMalformedResponse: molt.EUNAVAILABLE, model.ReasonCanceled: molt.EUNAVAILABLE,
	} {
		err := model.Fail(reason, "x", nil)
		if err.Code != code || molt.ErrorReason(err) != reason {
			t.Errorf("Fail(%s) = %s/%s; want %s/%s", reason, err.Code, err.Reason, code, reason)
		}
	}
}

func TestContextFailure(t *testing.T) {
	t.Parallel()
	parent, cancelParent := context.WithCancel(context.Background())
	call, cancelCall := context.WithTimeout(parent, 0)
	defer cancelCall()
	<-call.Done()
	if err := model.ContextFailure(parent, call, "x"); err.Reason != model.ReasonTimeout || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("expired call: %v; want timeout", err)
	}
	cancelParent()
	if err := model.ContextFailure(parent, call, "x"); err.Reason != model.ReasonCanceled || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled parent: %v; want canceled", err)
	}
	if err := model.ContextFailure(context.Background(), context.Background(), "x"); err != nil {
		t.Errorf("live context: %v; want nil", err)
	}
}
