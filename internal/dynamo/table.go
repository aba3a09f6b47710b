package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TTLAttribute is the table's time-to-live attribute (epoch seconds).
const TTLAttribute = "expires_at"

// tableWait bounds how long CreateTable waits for the table to become ACTIVE.
const tableWait = 5 * time.Minute

// CreateTable creates the table with molt's fixed schema if it does not exist
// (pay per request; key pk/sk; GSIs gsi1, gsi2, gsi3 and gsi4, projection ALL), waits
// until it is ACTIVE and enables TTL on expires_at. It is idempotent. Point-in-time recovery
// is left to the deployment template.
func CreateTable(ctx context.Context, api TableAPI, table string) error {
	s := func(name string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: types.ScalarAttributeTypeS}
	}
	key := func(hash, rng string) []types.KeySchemaElement {
		return []types.KeySchemaElement{
			{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange},
		}
	}
	gsi := func(name, hash, rng string) types.GlobalSecondaryIndex {
		return types.GlobalSecondaryIndex{IndexName: aws.String(name), KeySchema: key(hash, rng),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}
	}
	_, err := api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			s(attrPK), s(attrSK), s(attrG1PK), s(attrG1SK), s(attrG2PK), s(attrG2SK), s(attrG3PK), s(attrG3SK), s(attrG4SK),
		},
		KeySchema: key(attrPK, attrSK),
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			gsi(index1, attrG1PK, attrG1SK),
			gsi(index2, attrG2PK, attrG2SK),
			gsi(index3, attrG3PK, attrG3SK),
			gsi(index4, attrG2PK, attrG4SK),
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	if err := waitActive(ctx, api, table); err != nil {
		return err
	}
	_, err = api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(TTLAttribute), Enabled: aws.Bool(true),
		},
	})
	if err != nil && !ttlAlreadyOn(err) {
		return fmt.Errorf("enable ttl on %s: %w", table, err)
	}
	return nil
}

// ttlAlreadyOn reports DynamoDB's refusal to enable TTL a second time.
func ttlAlreadyOn(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "already enabled")
}

// waitActive polls DescribeTable until the table and its indexes are ACTIVE.
func waitActive(ctx context.Context, api TableAPI, table string) error {
	ctx, cancel := context.WithTimeout(ctx, tableWait)
	defer cancel()
	delay := 50 * time.Millisecond
	for {
		out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		var nf *types.ResourceNotFoundException
		switch {
		case err == nil && active(out.Table):
			return nil
		case err != nil && !errors.As(err, &nf):
			return fmt.Errorf("describe table %s: %w", table, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for table %s: %w", table, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, 2*time.Second)
	}
}

func active(t *types.TableDescription) bool {
	if t == nil || t.TableStatus != types.TableStatusActive {
		return false
	}
	for _, g := range t.GlobalSecondaryIndexes {
		if g.IndexStatus != "" && g.IndexStatus != types.IndexStatusActive {
			return false
		}
	}
	return true
}
