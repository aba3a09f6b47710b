package dynamo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/page"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/workspace"
)

// ReasonTooManyFiles is the ECONFLICT reason of a PutFile that would add a file to
// a surface that already has workspace.MaxFiles files (the SQLite adapter uses the
// same reason).
const ReasonTooManyFiles = "too_many_files"

// ReasonDeleting is the ECONFLICT reason of a PutWorkspace whose name belongs to a
// workspace being deleted (its partition is being cleaned up); try again shortly.
const ReasonDeleting = "deleting"

// deleteStale is the age after which a deletion mark is taken for one left by a
// delete that died (a Lambda runs at most 15 minutes): PutWorkspace finishes it.
const deleteStale = 15 * time.Minute

// Workspace and file attributes.
const (
	attrDeleting    = "deleting" // on a workspace META being deleted: when it began
	attrName        = "name"
	attrDescription = "description"
	attrPath        = "path"
	attrContent     = "content"
	attrSHA256      = "sha256"
	attrSize        = "size"
)

const (
	skMeta      = "META"
	skFiles     = "FILES" // the surface's file counter
	filePrefix  = "FILE#"
	gsiWSPK     = "WORKSPACES"
	batchMax    = 25 // DynamoDB's limit of requests in one BatchWriteItem
	putFileTrys = 4
	batchTries  = 8
)

func wsPK(name string) string { return "WS#" + name }

func metaKey(name string) map[string]types.AttributeValue { return key(wsPK(name), skMeta) }

func fileKey(ws, path string) map[string]types.AttributeValue {
	return key(wsPK(ws), filePrefix+path)
}

func reserved(name string) error {
	return &molt.Error{Code: molt.EINVALID, Field: "workspace", Reason: "reserved",
		Message: fmt.Sprintf("workspace name %q is reserved", name)}
}

func decodeWorkspace(m map[string]types.AttributeValue) workspace.Workspace {
	return workspace.Workspace{
		Name:        getS(m, attrName),
		Description: getS(m, attrDescription),
		CreatedAt:   getTime(m, attrCreatedAt),
		UpdatedAt:   getTime(m, attrUpdatedAt),
	}
}

// PutWorkspace creates or updates a workspace in one UpdateItem and reports whether
// it was created. A new workspace takes w.CreatedAt, or now when that is zero, and
// a sortable listing key from the id generator; an update keeps both. UpdatedAt is
// now. EINVALID (field "workspace") for a bad name or workspace.Global (reason
// "reserved"), EINVALID (field "description") for an overlong description;
// ECONFLICT ReasonDeleting while a deletion of that name is cleaning up (see
// DeleteWorkspace; a deletion that died is finished here once stale).
func (s *Store) PutWorkspace(ctx context.Context, w workspace.Workspace) (workspace.Workspace, bool, error) {
	if err := workspace.ValidateName(w.Name); err != nil {
		return workspace.Workspace{}, false, err
	}
	if w.Name == workspace.Global {
		return workspace.Workspace{}, false, reserved(w.Name)
	}
	if len(w.Description) > workspace.MaxDescLength {
		return workspace.Workspace{}, false, molt.Invalid("description", "description over %d characters", workspace.MaxDescLength)
	}
	now := s.now()
	created := w.CreatedAt.UTC()
	if created.IsZero() {
		created = now
	}
	sortKey := s.ids.NewID()
	e := &exprs{}
	u := &update{e: e}
	u.setVal(attrName, str(w.Name))
	u.setStr(attrDescription, w.Description)
	u.setVal(attrUpdatedAt, tnum(now))
	u.setVal(attrG1PK, str(gsiWSPK))
	ifNew := func(attr string, v types.AttributeValue) {
		n := e.name(attr)
		u.set = append(u.set, n+" = if_not_exists("+n+", "+e.value(v)+")")
	}
	ifNew(attrCreatedAt, tnum(created))
	ifNew(attrG1SK, str(sortKey))
	// Not while a deletion of that name is cleaning up the partition.
	cond := "attribute_not_exists(" + e.name(attrDeleting) + ")"
	var out *dynamodb.UpdateItemOutput
	for try := 0; ; try++ {
		var err error
		_, err = s.retrying(ctx, func(opt func(*dynamodb.Options)) (err error) {
			out, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(s.table), Key: metaKey(w.Name),
				UpdateExpression: aws.String(u.expr()), ConditionExpression: aws.String(cond),
				ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
				ReturnValues: types.ReturnValueAllOld,
			}, opt)
			return err
		})
		if _, isCond := conditionIndex(err); isCond && try == 0 {
			if err := s.finishStaleDelete(ctx, w.Name, now); err != nil {
				return workspace.Workspace{}, false, err
			}
			continue
		} else if isCond {
			return workspace.Workspace{}, false, molt.Conflict(ReasonDeleting, "workspace %s is being deleted; try again shortly", w.Name)
		}
		if err != nil {
			return workspace.Workspace{}, false, failure("put workspace "+w.Name, err)
		}
		break
	}
	res := workspace.Workspace{Name: w.Name, Description: w.Description, CreatedAt: created, UpdatedAt: now}
	// Our own sort key in the old image means an earlier attempt of this very call
	// created it (the SDK retried after a lost response).
	isNew := len(out.Attributes) == 0 || getS(out.Attributes, attrG1SK) == sortKey
	if !isNew {
		res.CreatedAt = getTime(out.Attributes, attrCreatedAt)
	}
	return res, isNew, nil
}

// GetWorkspace returns the workspace name; EINVALID for a bad name, ENOTFOUND when
// absent (workspace.Global is a surface, not a workspace: ENOTFOUND).
func (s *Store) GetWorkspace(ctx context.Context, name string) (workspace.Workspace, error) {
	if err := workspace.ValidateName(name); err != nil {
		return workspace.Workspace{}, err
	}
	m, ok, err := s.get(ctx, metaKey(name))
	if err != nil {
		return workspace.Workspace{}, failure("get workspace "+name, err)
	}
	if _, del := m[attrDeleting]; !ok || del {
		return workspace.Workspace{}, molt.NotFound("workspace %s not found", name)
	}
	return decodeWorkspace(m), nil
}

// ListWorkspaces lists workspaces newest first through gsi1 (by the id made at
// creation, so cursors stay valid while workspaces are created). EINVALID for a
// bad cursor or limit.
func (s *Store) ListWorkspaces(ctx context.Context, q page.Query) (page.Page[workspace.Workspace], error) {
	limit, after, err := q.Normalize()
	if err != nil {
		return page.Page[workspace.Workspace]{}, err
	}
	items, more, err := s.queryPage(ctx, afterQuery(index1, attrG1PK, gsiWSPK, attrG1SK, after, false), limit)
	if err != nil {
		return page.Page[workspace.Workspace]{}, failure("list workspaces", err)
	}
	out := page.Page[workspace.Workspace]{Items: make([]workspace.Workspace, 0, len(items))}
	for _, m := range items {
		out.Items = append(out.Items, decodeWorkspace(m))
	}
	if more && len(items) > 0 {
		out.Next = page.Cursor(getS(items[len(items)-1], attrG1SK))
	}
	return out, nil
}

// DeleteWorkspace marks the workspace's META item as being deleted (ENOTFOUND
// when absent), which makes it read as absent and every later PutFile and
// CreateSession to it fail, and PutWorkspace of that name refuse (ECONFLICT
// ReasonDeleting) until the deletion is done. It then deletes the files and file
// counter in batches, the sessions with their messages (those gsi1 lists: a
// session created a moment before may be missed, see deleteWorkspaceSessions),
// and last the META item. Until then nothing can write to the partition, so a
// workspace created again under that name never loses a write to the clean-up.
// EINVALID for a bad name or workspace.Global (reason "reserved"). If the
// deletion fails part way the error is returned with the workspace already gone;
// calling DeleteWorkspace again finishes it and returns ENOTFOUND, and so does a
// PutWorkspace of that name once the mark is older than deleteStale.
func (s *Store) DeleteWorkspace(ctx context.Context, name string) error {
	if err := workspace.ValidateName(name); err != nil {
		return err
	}
	if name == workspace.Global {
		return reserved(name)
	}
	e := &exprs{}
	u := &update{e: e}
	u.setVal(attrDeleting, tnum(s.now()))
	u.remove = append(u.remove, e.name(attrG1PK)) // out of ListWorkspaces
	cond := liveCond(e)
	retried, err := s.retrying(ctx, func(opt func(*dynamodb.Options)) error {
		_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.table), Key: metaKey(name),
			UpdateExpression: aws.String(u.expr()), ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
		}, opt)
		return err
	})
	_, isCond := conditionIndex(err)
	switch {
	case err != nil && !isCond:
		return failure("delete workspace "+name, err)
	case isCond && !retried:
		// Absent, or marked by an earlier delete (stopped part way or still
		// running): finish its work.
		if err := s.deleteLeftovers(ctx, name); err != nil {
			return err
		}
		return molt.NotFound("workspace %s not found", name)
	}
	// Marked by this call (or, when the SDK re-sent the request, maybe by another).
	return s.purgeWorkspace(ctx, name)
}

// finishStaleDelete purges workspace name when its deletion mark is older than
// deleteStale at now (the delete died); ECONFLICT ReasonDeleting while a
// deletion may still be running.
func (s *Store) finishStaleDelete(ctx context.Context, name string, now time.Time) error {
	m, ok, err := s.get(ctx, metaKey(name))
	if err != nil {
		return failure("put workspace "+name, err)
	}
	if _, del := m[attrDeleting]; !ok || !del {
		return nil // the deletion finished meanwhile
	}
	if at := getTime(m, attrDeleting); now.Sub(at) < deleteStale {
		return molt.Conflict(ReasonDeleting, "workspace %s is being deleted; try again shortly", name)
	}
	return s.purgeWorkspace(ctx, name)
}

// liveCond is the condition that the workspace META of a request exists and is not
// being deleted.
func liveCond(e *exprs) string {
	return "attribute_exists(" + e.name(attrPK) + ") AND attribute_not_exists(" + e.name(attrDeleting) + ")"
}

// purgeWorkspace deletes the partition and sessions of a workspace whose META is
// marked deleting, then the META. It stops, deleting nothing more, as soon as
// the mark is gone: another delete finished the job, and the name may already
// belong to a new workspace.
func (s *Store) purgeWorkspace(ctx context.Context, name string) error {
	what := "delete workspace " + name
	if ok, err := s.marked(ctx, name); err != nil {
		return failure(what, err)
	} else if !ok {
		return nil
	}
	if err := s.deleteSurface(ctx, name, false); err != nil {
		return fmt.Errorf("delete files of workspace %s: %w", name, err)
	}
	if ok, err := s.marked(ctx, name); err != nil {
		return failure(what, err)
	} else if !ok {
		return nil
	}
	if err := s.deleteWorkspaceSessions(ctx, name); err != nil {
		return fmt.Errorf("delete sessions of workspace %s: %w", name, err)
	}
	var e exprs
	_, err := s.retrying(ctx, func(opt func(*dynamodb.Options)) error {
		_, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(s.table), Key: metaKey(name),
			ConditionExpression:      aws.String("attribute_exists(" + e.name(attrDeleting) + ")"),
			ExpressionAttributeNames: e.names,
		}, opt)
		return err
	})
	if _, cond := conditionIndex(err); cond {
		return nil // another delete removed it first
	}
	if err != nil {
		return failure(what, err)
	}
	return nil
}

// marked reports whether the workspace's META exists with a deletion mark.
func (s *Store) marked(ctx context.Context, name string) (bool, error) {
	m, ok, err := s.get(ctx, metaKey(name))
	if err != nil {
		return false, err
	}
	_, del := m[attrDeleting]
	return ok && del, nil
}

// deleteLeftovers finishes the deletion of a workspace that DeleteWorkspace found
// absent or already marked: a marked one is purged; of an absent one, what a
// deletion that removed META before the rest (an older version of this
// adapter, or a hand) left behind is deleted, unless the workspace was created
// again meanwhile.
func (s *Store) deleteLeftovers(ctx context.Context, name string) error {
	m, ok, err := s.get(ctx, metaKey(name))
	if err != nil {
		return failure("delete workspace "+name, err)
	}
	if _, del := m[attrDeleting]; ok && del {
		return s.purgeWorkspace(ctx, name)
	}
	if ok {
		return nil // a live workspace of that name, created again meanwhile
	}
	if err := s.deleteSurface(ctx, name, true); err != nil {
		return fmt.Errorf("delete leftover files of workspace %s: %w", name, err)
	}
	if live, err := s.exists(ctx, metaKey(name)); err != nil {
		return failure("delete workspace "+name, err)
	} else if !live {
		if err := s.deleteWorkspaceSessions(ctx, name); err != nil {
			return fmt.Errorf("delete leftover sessions of workspace %s: %w", name, err)
		}
	}
	return nil
}

// deleteSurface deletes every item of the workspace's partition except META;
// with leftovers, nothing when the partition has a META item.
func (s *Store) deleteSurface(ctx context.Context, name string, leftovers bool) error {
	var e exprs
	items, err := s.queryAll(ctx, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String(e.name(attrPK) + " = " + e.value(str(wsPK(name)))),
		ProjectionExpression:      aws.String(e.name(attrPK) + ", " + e.name(attrSK)),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return err
	}
	var reqs []types.WriteRequest
	for _, m := range items {
		if getS(m, attrSK) == skMeta {
			if leftovers {
				return nil // a live workspace of that name: its files are its own
			}
			continue // the workspace's own META, marked deleting: removed last
		}
		reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{
			Key: map[string]types.AttributeValue{attrPK: m[attrPK], attrSK: m[attrSK]}}})
	}
	for len(reqs) > 0 {
		n := min(len(reqs), batchMax)
		if err := s.batchWrite(ctx, reqs[:n]); err != nil {
			return err
		}
		reqs = reqs[n:]
	}
	return nil
}

// batchWrite sends one BatchWriteItem and re-sends its unprocessed requests with
// backoff until none are left.
func (s *Store) batchWrite(ctx context.Context, reqs []types.WriteRequest) error {
	for try := 0; len(reqs) > 0; try++ {
		if try > 0 {
			if try >= batchTries {
				return fmt.Errorf("batch write: %d requests left unprocessed", len(reqs))
			}
			if err := backoff(ctx, try); err != nil {
				return err
			}
		}
		out, err := s.api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
			RequestItems: map[string][]types.WriteRequest{s.table: reqs},
		})
		if err != nil {
			return err
		}
		reqs = out.UnprocessedItems[s.table]
	}
	return nil
}

func validateFileKey(ws, path string) error {
	if err := workspace.ValidateName(ws); err != nil {
		return err
	}
	return workspace.ValidatePath(path)
}

func decodeFile(m map[string]types.AttributeValue) workspace.File {
	content := getB(m, attrContent)
	if content == nil {
		content = []byte{}
	}
	return workspace.File{
		Workspace: getS(m, attrWorkspace),
		Path:      getS(m, attrPath),
		Content:   content,
		SHA256:    getS(m, attrSHA256),
		Size:      int(getN(m, attrSize)),
		UpdatedAt: getTime(m, attrUpdatedAt),
	}
}

// PutFile writes one file of f.Workspace (workspace.Global allowed) and returns it
// with its hash, size and UpdatedAt (now). The write is one transaction with a
// check that the workspace exists and, for a new file, an increment of the
// surface's file counter. EINVALID for a bad workspace name or path, ETOOLARGE
// (field "content") over workspace.MaxFileSize, ENOTFOUND when the workspace does
// not exist, ECONFLICT/ReasonTooManyFiles when a new file would exceed
// workspace.MaxFiles. Nothing is written on any of these errors.
func (s *Store) PutFile(ctx context.Context, f workspace.File) (workspace.File, error) {
	return s.PutFileIf(ctx, f, workspace.Match{})
}

// PutFileIf is PutFile when m holds for the stored file. The hash m names is a
// condition of the transaction's put, so a change between the look and the
// write fails the write (and the next look reports the failed precondition).
// ECONFLICT/workspace.ReasonPrecondition, writing nothing, when m does not hold.
func (s *Store) PutFileIf(ctx context.Context, f workspace.File, m workspace.Match) (workspace.File, error) {
	if err := validateFileKey(f.Workspace, f.Path); err != nil {
		return workspace.File{}, err
	}
	if len(f.Content) > workspace.MaxFileSize {
		return workspace.File{}, &molt.Error{Code: molt.ETOOLARGE, Field: "content",
			Message: fmt.Sprintf("file over %d bytes", workspace.MaxFileSize)}
	}
	content := f.Content
	if content == nil {
		content = []byte{}
	}
	nf := workspace.NewFile(f.Workspace, f.Path, content, s.now())
	item := fileKey(nf.Workspace, nf.Path)
	item[attrWorkspace] = str(nf.Workspace)
	item[attrPath] = str(nf.Path)
	item[attrSHA256] = str(nf.SHA256)
	item[attrSize] = num(int64(nf.Size))
	item[attrUpdatedAt] = tnum(nf.UpdatedAt)
	if len(content) > 0 {
		item[attrContent] = &types.AttributeValueMemberB{Value: content}
	}
	tbl := aws.String(s.table)
	what := fmt.Sprintf("put file %s/%s", nf.Workspace, nf.Path)
	retriedBefore := false
	for try := 0; try < putFileTrys; try++ {
		exists, sha, err := s.fileHash(ctx, nf.Workspace, nf.Path)
		if err != nil {
			return workspace.File{}, failure(what, err)
		}
		if !m.Holds(exists, sha) {
			if retriedBefore && exists && sha == nf.SHA256 {
				return nf, nil // our earlier attempt landed
			}
			return workspace.File{}, workspace.PreconditionFailed(nf.Workspace, nf.Path)
		}
		var items []types.TransactWriteItem
		metaIdx := -1
		if nf.Workspace != workspace.Global {
			var e exprs
			metaIdx = len(items)
			items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
				TableName: tbl, Key: metaKey(nf.Workspace),
				ConditionExpression:      aws.String(liveCond(&e)),
				ExpressionAttributeNames: e.names}})
		}
		var e exprs
		fileCond := "attribute_not_exists(" + e.name(attrPK) + ")"
		if exists {
			fileCond = "attribute_exists(" + e.name(attrPK) + ")"
			if len(m.SHA256) > 0 {
				fileCond += " AND " + e.name(attrSHA256) + " = " + e.value(str(sha))
			}
		}
		fileIdx := len(items)
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: tbl, Item: item,
			ConditionExpression: aws.String(fileCond), ExpressionAttributeNames: e.names,
			ExpressionAttributeValues: e.values}})
		if !exists {
			var e exprs
			n := e.name(attrCount)
			items = append(items, types.TransactWriteItem{Update: &types.Update{
				TableName: tbl, Key: key(wsPK(nf.Workspace), skFiles),
				UpdateExpression:          aws.String("ADD " + n + " " + e.value(num(1))),
				ConditionExpression:       aws.String("attribute_not_exists(" + n + ") OR " + n + " < " + e.value(num(workspace.MaxFiles))),
				ExpressionAttributeNames:  e.names,
				ExpressionAttributeValues: e.values}})
		}
		retried, err := s.write(ctx, items)
		if err == nil {
			return nf, nil
		}
		idx, cond := conditionIndex(err)
		switch {
		case !cond:
			return workspace.File{}, failure(what, err)
		case idx == metaIdx:
			return workspace.File{}, molt.NotFound("workspace %s not found", nf.Workspace)
		case idx == fileIdx || retried:
			retriedBefore = retriedBefore || retried
			// The file appeared or went since we looked (or our own earlier attempt
			// landed): look again.
			continue
		default:
			return workspace.File{}, molt.Conflict(ReasonTooManyFiles, "workspace %s has %d files, the limit", nf.Workspace, workspace.MaxFiles)
		}
	}
	return workspace.File{}, molt.Errorf(molt.EUNAVAILABLE, "%s: the file kept changing concurrently", what)
}

// exists reports whether an item exists (strongly consistent, keys only).
func (s *Store) exists(ctx context.Context, k map[string]types.AttributeValue) (bool, error) {
	var e exprs
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: k, ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String(e.name(attrPK)), ExpressionAttributeNames: e.names,
	})
	if err != nil {
		return false, err
	}
	return len(out.Item) > 0, nil
}

// fileHash reports whether a file exists and its hash (strongly consistent,
// without its content).
func (s *Store) fileHash(ctx context.Context, ws, path string) (bool, string, error) {
	var e exprs
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: fileKey(ws, path), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String(e.name(attrPK) + ", " + e.name(attrSHA256)),
		ExpressionAttributeNames: e.names,
	})
	if err != nil {
		return false, "", err
	}
	return len(out.Item) > 0, getS(out.Item, attrSHA256), nil
}

// GetFile returns one file with its content; EINVALID for a bad name or path,
// ENOTFOUND when absent.
func (s *Store) GetFile(ctx context.Context, ws, path string) (workspace.File, error) {
	if err := validateFileKey(ws, path); err != nil {
		return workspace.File{}, err
	}
	m, ok, err := s.get(ctx, fileKey(ws, path))
	if err != nil {
		return workspace.File{}, failure(fmt.Sprintf("get file %s/%s", ws, path), err)
	}
	if !ok {
		return workspace.File{}, molt.NotFound("file %s/%s not found", ws, path)
	}
	return decodeFile(m), nil
}

// ListFiles returns every file of ws with content, sorted by path (the sort key
// order); an empty list when ws has none or does not exist. EINVALID for a bad
// name.
func (s *Store) ListFiles(ctx context.Context, ws string) ([]workspace.File, error) {
	if err := workspace.ValidateName(ws); err != nil {
		return nil, err
	}
	var e exprs
	items, err := s.queryAll(ctx, &dynamodb.QueryInput{
		KeyConditionExpression: aws.String(e.name(attrPK) + " = " + e.value(str(wsPK(ws))) +
			" AND begins_with(" + e.name(attrSK) + ", " + e.value(str(filePrefix)) + ")"),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, failure("list files of "+ws, err)
	}
	out := make([]workspace.File, 0, len(items))
	for _, m := range items {
		out = append(out, decodeFile(m))
	}
	// The sort key is "FILE#<path>", so key order is path order; keep it explicit
	// in case an emulator returns another order.
	slices.SortFunc(out, func(a, b workspace.File) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// DeleteFile removes one file and decrements the surface's file counter in one
// transaction; EINVALID for a bad name or path, ENOTFOUND when absent.
func (s *Store) DeleteFile(ctx context.Context, ws, path string) error {
	return s.DeleteFileIf(ctx, ws, path, workspace.Match{})
}

// DeleteFileIf is DeleteFile when m holds for the stored file: the hashes m
// names are a condition of the transaction's delete. ECONFLICT/
// workspace.ReasonPrecondition, deleting nothing, when m does not hold.
func (s *Store) DeleteFileIf(ctx context.Context, ws, path string, m workspace.Match) error {
	if err := validateFileKey(ws, path); err != nil {
		return err
	}
	if m.Absent {
		// Deleting only what does not exist: nothing to delete either way.
		exists, _, err := s.fileHash(ctx, ws, path)
		if err != nil {
			return failure(fmt.Sprintf("delete file %s/%s", ws, path), err)
		}
		if exists {
			return workspace.PreconditionFailed(ws, path)
		}
		return molt.NotFound("file %s/%s not found", ws, path)
	}
	tbl := aws.String(s.table)
	var e, c exprs
	n := c.name(attrCount)
	cond := "attribute_exists(" + e.name(attrPK) + ")"
	if len(m.SHA256) > 0 {
		var in []string
		for _, h := range m.SHA256 {
			in = append(in, e.value(str(h)))
		}
		cond += " AND " + e.name(attrSHA256) + " IN (" + strings.Join(in, ", ") + ")"
	}
	items := []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: tbl, Key: fileKey(ws, path),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  e.names,
			ExpressionAttributeValues: e.values}},
		{Update: &types.Update{TableName: tbl, Key: key(wsPK(ws), skFiles),
			UpdateExpression:         aws.String("ADD " + n + " " + c.value(num(-1))),
			ExpressionAttributeNames: c.names, ExpressionAttributeValues: c.values}},
	}
	retried, err := s.write(ctx, items)
	if _, failed := conditionIndex(err); failed {
		if retried {
			return nil // our earlier attempt deleted it
		}
		if !m.IsZero() {
			exists, _, herr := s.fileHash(ctx, ws, path)
			if herr != nil {
				return failure(fmt.Sprintf("delete file %s/%s", ws, path), herr)
			}
			if exists || m.Exists || len(m.SHA256) > 0 {
				return workspace.PreconditionFailed(ws, path)
			}
		}
		return molt.NotFound("file %s/%s not found", ws, path)
	}
	if err != nil {
		return failure(fmt.Sprintf("delete file %s/%s", ws, path), err)
	}
	return nil
}

// ListSurface returns every file of the global surface and of ws (none when ws
// is workspace.Global), each sorted by path. The two surfaces are two
// partitions, so it sends their two queries at once. EINVALID for a bad name.
func (s *Store) ListSurface(ctx context.Context, ws string) (global, own []workspace.File, err error) {
	if err := workspace.ValidateName(ws); err != nil {
		return nil, nil, err
	}
	if ws == workspace.Global {
		global, err = s.ListFiles(ctx, ws)
		return global, []workspace.File{}, err
	}
	var ownErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		own, ownErr = s.ListFiles(ctx, ws)
	}()
	global, err = s.ListFiles(ctx, workspace.Global)
	<-done
	if err != nil {
		return nil, nil, err
	}
	if ownErr != nil {
		return nil, nil, ownErr
	}
	return global, own, nil
}

// Attributes of a workspace's overrides of the settings, on its META item: so
// deleting the workspace deletes them, and PutWorkspace (an UpdateItem of
// other attributes) keeps them.
const (
	attrWSSettings    = "ws_settings"
	attrWSSettingsRev = "ws_settings_rev"
)

// ReadWorkspaceSettings returns workspace ws's overrides of the settings (none
// when none were saved) with their revision, strongly consistent. EINVALID for
// a bad name, ENOTFOUND when the workspace does not exist or is being deleted.
func (s *Store) ReadWorkspaceSettings(ctx context.Context, ws string) (settings.Overrides, int64, error) {
	if err := workspace.ValidateName(ws); err != nil {
		return settings.Overrides{}, 0, err
	}
	m, ok, err := s.get(ctx, metaKey(ws))
	if err != nil {
		return settings.Overrides{}, 0, failure("get settings of workspace "+ws, err)
	}
	if _, del := m[attrDeleting]; !ok || del {
		return settings.Overrides{}, 0, molt.NotFound("workspace %s not found", ws)
	}
	o, err := settings.DecodeOverrides(getS(m, attrWSSettings))
	if err != nil {
		return settings.Overrides{}, 0, fmt.Errorf("decode stored settings of workspace %s: %w", ws, err)
	}
	return o, getN(m, attrWSSettingsRev), nil
}

// PutWorkspaceSettingsIf saves o as workspace ws's overrides after Validate
// with one UpdateItem of its META, conditional on the workspace being live and
// the overrides' revision being rev, and returns the new revision.
// ECONFLICT/settings.ReasonChanged when the revision moved on, ENOTFOUND when
// the workspace does not exist or is being deleted; EINVALID writes nothing.
// After a retried request whose first attempt may have landed, a stored
// document equal to this one at rev+1 counts as this write.
func (s *Store) PutWorkspaceSettingsIf(ctx context.Context, ws string, o settings.Overrides, rev int64) (int64, error) {
	if err := workspace.ValidateName(ws); err != nil {
		return 0, err
	}
	if err := o.Validate(); err != nil {
		return 0, err
	}
	doc := string(o.Encode())
	e := &exprs{}
	u := &update{e: e}
	u.setVal(attrWSSettings, str(doc))
	u.setVal(attrWSSettingsRev, num(rev+1))
	cond := liveCond(e) + " AND "
	if rev == 0 {
		cond += "attribute_not_exists(" + e.name(attrWSSettingsRev) + ")"
	} else {
		cond += e.name(attrWSSettingsRev) + " = " + e.value(num(rev))
	}
	retried, err := s.retrying(ctx, func(opt func(*dynamodb.Options)) error {
		_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.table), Key: metaKey(ws),
			UpdateExpression: aws.String(u.expr()), ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
		}, opt)
		return err
	})
	if _, isCond := conditionIndex(err); isCond {
		m, ok, gerr := s.get(ctx, metaKey(ws))
		if gerr != nil {
			return 0, failure("put settings of workspace "+ws, gerr)
		}
		if _, del := m[attrDeleting]; !ok || del {
			return 0, molt.NotFound("workspace %s not found", ws)
		}
		if retried && getN(m, attrWSSettingsRev) == rev+1 && getS(m, attrWSSettings) == doc {
			return rev + 1, nil
		}
		return 0, &molt.Error{Code: molt.ECONFLICT, Reason: settings.ReasonChanged,
			Message: fmt.Sprintf("the settings of workspace %s are no longer at revision %d", ws, rev), Err: err}
	}
	if err != nil {
		return 0, failure("put settings of workspace "+ws, err)
	}
	return rev + 1, nil
}
