// Package s3blob is the S3 adapter of the blob port: one object per key in one
// bucket.
//
// Build the client with ClientOptions so that emulators (LocalStack, the Go
// emulator), reached through AWS_ENDPOINT_URL, get path-style addressing:
//
//	client := s3.NewFromConfig(cfg, s3blob.ClientOptions())
//	store := s3blob.New(client, bucket)
package s3blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/molt-dev/molt/internal/awsenv"
	"github.com/molt-dev/molt/internal/awserr"
	"github.com/molt-dev/molt/internal/blob"
	"github.com/molt-dev/molt/internal/molt"
)

// API is the part of the S3 client the Store uses (*s3.Client implements it).
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// BucketAPI is the part of the S3 client EnsureBucket uses (*s3.Client
// implements it).
type BucketAPI interface {
	HeadBucket(ctx context.Context, in *s3.HeadBucketInput, optFns ...func(*s3.Options)) (*s3.HeadBucketOutput, error)
	CreateBucket(ctx context.Context, in *s3.CreateBucketInput, optFns ...func(*s3.Options)) (*s3.CreateBucketOutput, error)
	Options() s3.Options
}

var (
	_ API        = (*s3.Client)(nil)
	_ BucketAPI  = (*s3.Client)(nil)
	_ blob.Store = (*Store)(nil)
)

// ClientOptions returns the client option molt uses for S3. On AWS it keeps the
// SDK defaults. When AWS_ENDPOINT_URL points at an emulator it turns on path-style
// addressing (emulators cannot resolve virtual-hosted bucket names) and validates
// response checksums only when asked to (emulators send none, and the SDK would
// log a line for every GetObject).
func ClientOptions() func(*s3.Options) {
	emulated := awsenv.Endpoint() != ""
	return func(o *s3.Options) {
		if emulated {
			o.UsePathStyle = true
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	}
}

// Store keeps blobs as objects of one bucket.
type Store struct {
	api      API
	bucket   string
	pageSize int32 // keys per list page; 0: the S3 default (1000)
}

// New returns a Store on bucket.
func New(api API, bucket string) *Store { return &Store{api: api, bucket: bucket} }

// Put writes data at key, replacing what was there. EINVALID for a bad key,
// ETOOLARGE above blob.MaxBlob.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := checkPut(key, data); err != nil {
		return fmt.Errorf("put blob %s: %w", key, err)
	}
	_, err := s.api.PutObject(ctx, s.putInput(key, data))
	if err != nil {
		return fmt.Errorf("put blob %s: %w", key, awserr.Classify(err, "s3"))
	}
	return nil
}

// PutIfAbsent writes data at key only when no object is there (If-None-Match: *);
// ECONFLICT with reason "exists" otherwise. A concurrent conditional write of the
// same key (409 ConditionalRequestConflict) is EUNAVAILABLE: try again.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := checkPut(key, data); err != nil {
		return fmt.Errorf("put blob %s if absent: %w", key, err)
	}
	in := s.putInput(key, data)
	in.IfNoneMatch = aws.String("*")
	_, err := s.api.PutObject(ctx, in)
	switch {
	case err == nil:
		return nil
	case httpStatus(err) == http.StatusPreconditionFailed || errorCode(err) == "PreconditionFailed":
		return molt.Conflict("exists", "blob %s already exists", key)
	case httpStatus(err) == http.StatusConflict:
		return molt.Unavailable(err, "put blob %s if absent: concurrent write", key)
	default:
		return fmt.Errorf("put blob %s if absent: %w", key, awserr.Classify(err, "s3"))
	}
}

func (s *Store) putInput(key string, data []byte) *s3.PutObjectInput {
	return &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}
}

func checkPut(key string, data []byte) error {
	if err := blob.ValidateKey(key); err != nil {
		return err
	}
	if len(data) > blob.MaxBlob {
		return &molt.Error{Code: molt.ETOOLARGE, Field: "data", Message: fmt.Sprintf("blob of %d bytes is over the %d byte limit", len(data), blob.MaxBlob)}
	}
	return nil
}

// Get returns the blob at key: ENOTFOUND when absent, EINVALID for a bad key.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := blob.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("get blob %s: %w", key, err)
	}
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		if notFound(err) {
			return nil, molt.NotFound("blob %s not found", key)
		}
		return nil, fmt.Errorf("get blob %s: %w", key, awserr.Classify(err, "s3"))
	}
	defer out.Body.Close()
	data, err := io.ReadAll(io.LimitReader(out.Body, blob.MaxBlob+1))
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", key, awserr.Classify(err, "s3"))
	}
	if len(data) > blob.MaxBlob {
		return nil, &molt.Error{Code: molt.ETOOLARGE, Message: fmt.Sprintf("blob %s is over the %d byte limit", key, blob.MaxBlob)}
	}
	return data, nil
}

// Delete removes key; deleting an absent key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := blob.ValidateKey(key); err != nil {
		return fmt.Errorf("delete blob %s: %w", key, err)
	}
	_, err := s.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil && !notFound(err) {
		return fmt.Errorf("delete blob %s: %w", key, awserr.Classify(err, "s3"))
	}
	return nil
}

// List returns the keys starting with prefix, sorted, following every page.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	if err := blob.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("list blobs %s: %w", prefix, err)
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket)}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	if s.pageSize > 0 {
		in.MaxKeys = aws.Int32(s.pageSize)
	}
	keys := []string{}
	p := s3.NewListObjectsV2Paginator(s.api, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list blobs %s: %w", prefix, awserr.Classify(err, "s3"))
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	// S3 already lists in byte order; sorting keeps the contract explicit for
	// S3-compatible stores that do not.
	sort.Strings(keys)
	return keys, nil
}

// EnsureBucket creates bucket unless it already exists and is ours. It is
// idempotent; an existing bucket owned by another account is an error.
func EnsureBucket(ctx context.Context, api BucketAPI, bucket string) error {
	_, err := api.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	if err == nil {
		return nil
	}
	var nsb *types.NoSuchBucket
	if !notFound(err) && !errors.As(err, &nsb) {
		return fmt.Errorf("check bucket %s: %w", bucket, err)
	}
	in := &s3.CreateBucketInput{Bucket: aws.String(bucket)}
	if region := api.Options().Region; region != "" && region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(region)}
	}
	if _, err := api.CreateBucket(ctx, in); err != nil {
		var owned *types.BucketAlreadyOwnedByYou
		if errors.As(err, &owned) {
			return nil
		}
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	return nil
}

// notFound reports whether err says the object (or, for HeadBucket, the bucket)
// does not exist. A missing bucket on an object call is not "not found": it is a
// configuration error the caller must see.
func notFound(err error) bool {
	var nsb *types.NoSuchBucket
	if errors.As(err, &nsb) || errorCode(err) == "NoSuchBucket" {
		return false
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	switch errorCode(err) {
	case "NoSuchKey", "NotFound":
		return true
	}
	return httpStatus(err) == http.StatusNotFound
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
