package dynamo

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/settings"
)

// Token and settings attributes.
const (
	attrLevel    = "level"
	attrDoc      = "doc"
	attrRevision = "rev"
	attrLastUsed = "last_used_at"
	attrRevoked  = "revoked_at"
)

// gsiTokensPK lists every token in gsi1, sorted by id.
const gsiTokensPK = "TOKENS"

// sha256Hex is the length of a token hash.
const sha256Hex = 64

// maxHashLen bounds a token hash (hex SHA-256 is 64).
const maxHashLen = 128

func tokenKey(hash string) map[string]types.AttributeValue { return key("TOKEN#"+hash, "TOKEN") }

func settingsKey() map[string]types.AttributeValue { return key("SETTINGS", "SETTINGS") }

// PutToken stores a token by its hash with a conditional put. EINVALID for an
// empty or overlong hash or a name over 100 characters, ECONFLICT (reason
// "exists") when a token with that hash is stored.
func (s *Store) PutToken(ctx context.Context, t auth.Token) error {
	if t.Hash == "" || len(t.Hash) > maxHashLen {
		return molt.Invalid("hash", "token hash is empty or too long")
	}
	if len(t.Name) > 100 || len(t.ID) > maxHashLen || len(t.Workspace) > 100 || len(t.Level) > 32 {
		return molt.Invalid("name", "token field too long")
	}
	created := t.CreatedAt
	if created.IsZero() {
		created = s.now()
	}
	item := tokenKey(t.Hash)
	item[attrID] = str(t.ID)
	item[attrLevel] = str(string(t.Level))
	if t.Workspace != "" {
		item[attrWorkspace] = str(t.Workspace)
	}
	if t.Name != "" {
		item[attrName] = str(t.Name)
	}
	item[attrCreatedAt] = tnum(created)
	item[attrG1PK] = str(gsiTokensPK)
	item[attrG1SK] = str(t.ID)
	if !t.RevokedAt.IsZero() {
		item[attrRevoked] = tnum(t.RevokedAt)
	}
	var e exprs
	var n attempts
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item,
		ConditionExpression:      aws.String("attribute_not_exists(" + e.name(attrPK) + ")"),
		ExpressionAttributeNames: e.names,
	}, n.opt)
	if _, cond := conditionIndex(err); cond {
		if n.retried() {
			// Our first attempt may have stored it: the same token is not a conflict.
			if got, gerr := s.TokenByHash(ctx, t.Hash); gerr == nil && got.ID == t.ID &&
				got.Level == t.Level && got.Workspace == t.Workspace && got.Name == t.Name && got.CreatedAt.Equal(created) {
				return nil
			}
		}
		return &molt.Error{Code: molt.ECONFLICT, Reason: "exists", Message: fmt.Sprintf("token %s exists", t.ID), Err: err}
	}
	if err != nil {
		return failure("put token "+t.ID, err)
	}
	return nil
}

// TokenByHash returns the token with that hash (strongly consistent); ENOTFOUND
// when there is none.
func (s *Store) TokenByHash(ctx context.Context, hash string) (auth.Token, error) {
	if hash == "" || len(hash) > maxHashLen {
		return auth.Token{}, molt.NotFound("no such token")
	}
	m, ok, err := s.get(ctx, tokenKey(hash))
	if err != nil {
		return auth.Token{}, failure("get token", err)
	}
	if !ok {
		return auth.Token{}, molt.NotFound("no such token")
	}
	t := decodeToken(m)
	t.Hash = hash
	return t, nil
}

func decodeToken(m map[string]types.AttributeValue) auth.Token {
	return auth.Token{
		ID:         getS(m, attrID),
		Level:      auth.Level(getS(m, attrLevel)),
		Workspace:  getS(m, attrWorkspace),
		Name:       getS(m, attrName),
		CreatedAt:  getTime(m, attrCreatedAt),
		LastUsedAt: getTime(m, attrLastUsed),
		RevokedAt:  getTime(m, attrRevoked),
	}
}

// ListTokens returns every token gsi1 lists, oldest first, without hashes. The
// index is eventually consistent: a token stored a moment ago may be missing. A
// token stored by a version before the listing is listed once it is used
// (TouchToken indexes it).
func (s *Store) ListTokens(ctx context.Context) ([]auth.Token, error) {
	var e exprs
	items, err := s.queryAll(ctx, &dynamodb.QueryInput{
		IndexName:                 aws.String(index1),
		KeyConditionExpression:    aws.String(e.name(attrG1PK) + " = " + e.value(str(gsiTokensPK))),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
	})
	if err != nil {
		return nil, failure("list tokens", err)
	}
	out := make([]auth.Token, 0, len(items))
	for _, m := range items {
		out = append(out, decodeToken(m))
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// RevokeToken finds the token by id in gsi1 (or takes ref as its hash) and
// sets revoked_at with a conditional update (only when not revoked yet), then
// reads it back consistently. ENOTFOUND when gsi1 lists no token with that id
// (one stored a moment ago, or by a version before the listing and never used
// since, is not listed; revoke it by hash).
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) (auth.Token, error) {
	if id == "" || len(id) > maxHashLen {
		return auth.Token{}, molt.NotFound("no such token")
	}
	hash := id
	if len(id) != sha256Hex {
		var q exprs
		items, err := s.queryAll(ctx, &dynamodb.QueryInput{
			IndexName: aws.String(index1),
			KeyConditionExpression: aws.String(q.name(attrG1PK) + " = " + q.value(str(gsiTokensPK)) +
				" AND " + q.name(attrG1SK) + " = " + q.value(str(id))),
			ExpressionAttributeNames:  q.names,
			ExpressionAttributeValues: q.values,
		})
		if err != nil {
			return auth.Token{}, failure("revoke token "+id, err)
		}
		if len(items) == 0 {
			return auth.Token{}, molt.NotFound("no token %s", id)
		}
		hash, _ = strings.CutPrefix(getS(items[0], attrPK), "TOKEN#")
	}
	var e exprs
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(s.table),
		Key:              tokenKey(hash),
		UpdateExpression: aws.String("SET " + e.name(attrRevoked) + " = " + e.value(tnum(at))),
		ConditionExpression: aws.String("attribute_exists(" + e.name(attrPK) + ") AND attribute_not_exists(" +
			e.name(attrRevoked) + ")"),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
	})
	if _, cond := conditionIndex(err); err != nil && !cond {
		return auth.Token{}, failure("revoke token "+id, err)
	}
	t, err := s.TokenByHash(ctx, hash)
	if molt.ErrorCode(err) == molt.ENOTFOUND {
		return auth.Token{}, molt.NotFound("no token %s", id)
	}
	if err != nil {
		return auth.Token{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	t.Hash = ""
	return t, nil
}

// TouchToken sets last_used_at to at when at is later, with a conditional
// update that also indexes the token in gsi1 (tokens stored before the listing
// existed become listed). ENOTFOUND when absent.
func (s *Store) TouchToken(ctx context.Context, hash string, at time.Time) error {
	if hash == "" || len(hash) > maxHashLen {
		return molt.NotFound("no such token")
	}
	var e exprs
	used := e.name(attrLastUsed)
	atv := e.value(tnum(at))
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table),
		Key:       tokenKey(hash),
		UpdateExpression: aws.String("SET " + used + " = " + atv + ", " + e.name(attrG1PK) + " = " + e.value(str(gsiTokensPK)) +
			", " + e.name(attrG1SK) + " = " + e.name(attrID)),
		ConditionExpression: aws.String("attribute_exists(" + e.name(attrPK) + ") AND (attribute_not_exists(" + used +
			") OR " + used + " < " + atv + ")"),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
	})
	if _, cond := conditionIndex(err); cond {
		// Absent, or used later already.
		if _, gerr := s.TokenByHash(ctx, hash); gerr != nil {
			return gerr
		}
		return nil
	}
	if err != nil {
		return failure("touch token", err)
	}
	return nil
}

// GetSettings returns the saved settings, or settings.Default() when none were
// saved. Keys missing from the saved document (added by a later version) take
// their default.
func (s *Store) GetSettings(ctx context.Context) (settings.Settings, error) {
	st, _, err := s.ReadSettings(ctx)
	return st, err
}

// ReadSettings returns the saved settings (as GetSettings, strongly consistent)
// with their revision: 0 when none were saved or the item predates revisions.
func (s *Store) ReadSettings(ctx context.Context) (settings.Settings, int64, error) {
	m, ok, err := s.get(ctx, settingsKey())
	if err != nil {
		return settings.Settings{}, 0, failure("get settings", err)
	}
	out := settings.Default()
	if !ok {
		return out, 0, nil
	}
	if err := json.Unmarshal([]byte(getS(m, attrDoc)), &out); err != nil {
		return settings.Settings{}, 0, fmt.Errorf("decode stored settings: %w", err)
	}
	return out, getN(m, attrRevision), nil
}

// PutSettings saves the settings after settings.Validate and advances the
// revision (one UpdateItem); EINVALID (naming the key) writes nothing.
func (s *Store) PutSettings(ctx context.Context, st settings.Settings) error {
	if err := st.Validate(); err != nil {
		return err
	}
	var e exprs
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: settingsKey(),
		UpdateExpression: aws.String("SET " + e.name(attrDoc) + " = " + e.value(str(string(st.Encode()))) +
			", " + e.name(attrUpdatedAt) + " = " + e.value(tnum(s.now())) +
			" ADD " + e.name(attrRevision) + " " + e.value(num(1))),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
	})
	if err != nil {
		return failure("put settings", err)
	}
	return nil
}

// PutSettingsIf saves the settings after settings.Validate with a put
// conditional on the stored revision being rev, and returns the new revision.
// ECONFLICT/settings.ReasonChanged when it is not; EINVALID (naming the key)
// writes nothing. After a retried request whose first attempt may have landed,
// a stored document equal to this one at rev+1 counts as this write.
func (s *Store) PutSettingsIf(ctx context.Context, st settings.Settings, rev int64) (int64, error) {
	if err := st.Validate(); err != nil {
		return 0, err
	}
	doc := string(st.Encode())
	item := settingsKey()
	item[attrDoc] = str(doc)
	item[attrUpdatedAt] = tnum(s.now())
	item[attrRevision] = num(rev + 1)
	var e exprs
	cond := "attribute_not_exists(" + e.name(attrRevision) + ")"
	if rev > 0 {
		cond = e.name(attrRevision) + " = " + e.value(num(rev))
	}
	var n attempts
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item,
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
	}, n.opt)
	if _, ok := conditionIndex(err); ok {
		if n.retried() {
			if m, found, gerr := s.get(ctx, settingsKey()); gerr == nil && found &&
				getN(m, attrRevision) == rev+1 && getS(m, attrDoc) == doc {
				return rev + 1, nil
			}
		}
		return 0, &molt.Error{Code: molt.ECONFLICT, Reason: settings.ReasonChanged,
			Message: fmt.Sprintf("the settings are no longer at revision %d", rev), Err: err}
	}
	if err != nil {
		return 0, failure("put settings", err)
	}
	return rev + 1, nil
}
