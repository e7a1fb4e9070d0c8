package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// mountTmpfs mounts a tmpfs of the given size on a new directory: a real
// file system that really fills up and can really be made read-only. It
// needs CAP_SYS_ADMIN (CI runs as root, and fails the test without it);
// elsewhere the test is skipped and says why.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		testutil.SkipOrFailUnderCI(t, "mounting a tmpfs (the disk-full and read-only tests) needs root (CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes a file until the file system is full and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			return path
		}
	}
}

// integrity runs PRAGMA integrity_check on the database file with a
// connection of its own.
func integrity(t *testing.T, dbPath string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var res string
	require.NoError(t, db.QueryRow("PRAGMA integrity_check").Scan(&res))
	return res
}

func createRepos(t *testing.T, s *store.Store, ws string, n int, prefix string) []string {
	t.Helper()
	var ids []string
	for i := range n {
		r, err := s.CreateRepository(context.Background(), model.Repository{WorkspaceID: ws, Provider: "gitlab", Host: "gitlab.com",
			Path: fmt.Sprintf("acme/%s-%d", prefix, i)})
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}
	return ids
}

// TestFullDiskIsAClearErrorAndCorruptsNothing fills the file system under
// the database: writes fail with ErrUnavailable saying the disk is full, a
// batch is attached whole or not at all, and once space is freed the same
// store writes again and PRAGMA integrity_check is ok.
func TestFullDiskIsAClearErrorAndCorruptsNothing(t *testing.T) {
	ctx := context.Background()
	dir := mountTmpfs(t, "2m")
	s, err := store.Open(ctx, dir, store.Options{})
	require.NoError(t, err)
	defer s.Close()
	f := newFixture(t, s, "acme")
	task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.github.ID)
	require.NoError(t, err)
	batch := createRepos(t, s, f.ws.ID, 50, "batch")

	filler := fill(t, dir)
	// Free pages in the file may absorb a few writes; keep writing until
	// the disk refuses, as a busy orchestrator would.
	refused, accepted := 0, 0
	var first error
	for i := 0; i < 5000 && refused < 20; i++ {
		_, err := s.CreateRepository(ctx, model.Repository{WorkspaceID: f.ws.ID, Provider: "github", Host: "github.com",
			Path: fmt.Sprintf("acme/filler-%d-%0100d", i, i)})
		if err == nil {
			accepted++
			continue
		}
		refused++
		if first == nil {
			first = err
		}
		require.ErrorIs(t, err, errdefs.ErrUnavailable, "a full disk is an unavailable store, not an internal error")
		assert.Contains(t, err.Error(), "disk is full", "the error says what to fix")
	}
	require.NotNil(t, first, "the disk never filled")
	t.Logf("first refusal: %v", first)

	_, batchErr := s.AddSources(ctx, task.ID, batch, testActor)
	got, err := s.GetTask(ctx, task.ID)
	require.NoError(t, err, "reads work on a full disk")
	if batchErr != nil {
		require.ErrorIs(t, batchErr, errdefs.ErrUnavailable)
		assert.Len(t, got.Repositories, 1, "a refused batch attached nothing")
	} else {
		assert.Len(t, got.Repositories, 1+len(batch), "a batch is all or nothing")
	}

	require.NoError(t, os.Remove(filler))
	if batchErr != nil {
		_, err = s.AddSources(ctx, task.ID, batch, testActor)
		require.NoError(t, err, "the same store writes again once space is freed")
	}
	got, err = s.GetTask(ctx, task.ID)
	require.NoError(t, err)
	assert.Len(t, got.Repositories, 1+len(batch))
	assert.Equal(t, uint64(2), got.Providers.Generation, "one batch, one generation, whatever the failures before")
	require.NoError(t, s.Close())
	assert.Equal(t, "ok", integrity(t, filepath.Join(dir, "toolscope.db")))

	again, err := store.Open(ctx, dir, store.Options{})
	require.NoError(t, err)
	defer again.Close()
	got, err = again.GetTask(ctx, task.ID)
	require.NoError(t, err)
	assert.Len(t, got.Repositories, 1+len(batch), "everything committed survives a reopen")
	testutil.Figure(t, "sqlite disk full", "%d writes refused with ErrUnavailable (\"disk is full\") after %d accepted; batch of %d all-or-nothing (refused: %v); integrity_check ok after freeing space",
		refused, accepted, len(batch), batchErr != nil)
}

// TestReadOnlyDatabaseIsAClearErrorAndCorruptsNothing opens a database
// whose file system is mounted read-only (a read-only bind mount of the
// data directory: as root, file modes alone cannot make a file read-only,
// and Linux refuses to remount a file system read-only while a store holds
// its file open for writing). Opening fails with ErrUnavailable saying the
// database is read-only, nothing is changed, and the same data opens and
// writes normally through the writable path; PRAGMA integrity_check is ok.
func TestReadOnlyDatabaseIsAClearErrorAndCorruptsNothing(t *testing.T) {
	ctx := context.Background()
	dir := mountTmpfs(t, "8m")
	s, err := store.Open(ctx, dir, store.Options{})
	require.NoError(t, err)
	f := newFixture(t, s, "acme")
	task, err := s.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "t"}, f.github.ID)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	before, err := os.ReadFile(filepath.Join(dir, "toolscope.db"))
	require.NoError(t, err)

	ro := t.TempDir()
	require.NoError(t, syscall.Mount(dir, ro, "", syscall.MS_BIND, ""))
	t.Cleanup(func() { _ = syscall.Unmount(ro, syscall.MNT_DETACH) })
	require.NoError(t, syscall.Mount("", ro, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""))

	refused, err := store.Open(ctx, ro, store.Options{})
	if err == nil {
		_ = refused.Close()
	}
	require.Error(t, err, "a store on a read-only file system cannot work")
	assert.ErrorIs(t, err, errdefs.ErrUnavailable)
	assert.Contains(t, err.Error(), "read-only", "the error says what to fix")
	assert.Contains(t, err.Error(), ro, "the error names the file")
	t.Logf("open refused: %v", err)

	after, err := os.ReadFile(filepath.Join(dir, "toolscope.db"))
	require.NoError(t, err)
	assert.Equal(t, before, after, "the refused open changed nothing")
	assert.Equal(t, "ok", integrity(t, filepath.Join(dir, "toolscope.db")))

	s, err = store.Open(ctx, dir, store.Options{})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.AddSources(ctx, task.ID, []string{f.gitlab.ID}, testActor)
	require.NoError(t, err, "the writable path works as before")
	testutil.Figure(t, "sqlite read-only", "open refused with ErrUnavailable (%q); database file byte-identical afterwards; integrity_check ok", "read-only")
}
