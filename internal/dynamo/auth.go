package dynamo

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/settings"
)

// Token and settings attributes.
const (
	attrLevel = "level"
	attrDoc   = "doc"
)

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
	return auth.Token{
		Hash:      hash,
		ID:        getS(m, attrID),
		Level:     auth.Level(getS(m, attrLevel)),
		Workspace: getS(m, attrWorkspace),
		Name:      getS(m, attrName),
		CreatedAt: getTime(m, attrCreatedAt),
	}, nil
}

// GetSettings returns the saved settings, or settings.Default() when none were
// saved. Keys missing from the saved document (added by a later version) take
// their default.
func (s *Store) GetSettings(ctx context.Context) (settings.Settings, error) {
	m, ok, err := s.get(ctx, settingsKey())
	if err != nil {
		return settings.Settings{}, failure("get settings", err)
	}
	out := settings.Default()
	if !ok {
		return out, nil
	}
	if err := json.Unmarshal([]byte(getS(m, attrDoc)), &out); err != nil {
		return settings.Settings{}, fmt.Errorf("decode stored settings: %w", err)
	}
	return out, nil
}

// PutSettings saves the settings after settings.Validate; EINVALID (naming the
// key) writes nothing.
func (s *Store) PutSettings(ctx context.Context, st settings.Settings) error {
	if err := st.Validate(); err != nil {
		return err
	}
	item := settingsKey()
	item[attrDoc] = str(string(st.Encode()))
	item[attrUpdatedAt] = tnum(s.now())
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return failure("put settings", err)
	}
	return nil
}
