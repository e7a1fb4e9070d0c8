package executortest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/toolscope/toolscope/internal/testutil"
)

// GitImage is the image of the workspace cases: agentctl runs git where
// it runs. It is Debian's minimal root file system with git and
// ca-certificates, made by mmdebstrap (Debian's packages are reachable,
// an image registry is not) and imported into the engine, where it stays
// as this machine's cache: a fresh machine builds it once (about a minute).
const GitImage = "toolscope-test-git:1"

// gitImageSuite is the Debian release of GitImage.
const gitImageSuite = "bookworm"

var (
	gitImageOnce sync.Once
	gitImageErr  error
)

// BuildGitImage returns GitImage, built unless the engine has it. Test
// processes of several packages may ask at once: one builds, the others
// wait for it (a lock in the machine's toolscope cache directory).
func BuildGitImage(t testing.TB, cli *client.Client) string {
	t.Helper()
	gitImageOnce.Do(func() { gitImageErr = buildGitImage(cli) })
	if gitImageErr != nil {
		t.Fatalf("build the image with git: %v", gitImageErr)
	}
	return GitImage
}

func buildGitImage(cli *client.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, GitImage); err == nil {
		return nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(cache, "toolscope"), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(cache, "toolscope", "test-images.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
	if _, err := cli.ImageInspect(ctx, GitImage); err == nil {
		return nil // another package's tests built it meanwhile
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return fmt.Errorf("mmdebstrap is needed to build %s (apt-get install mmdebstrap; .ci/run installs it): %w", GitImage, err)
	}
	// The root file system as a tar stream on stdout, straight into the
	// engine: nothing is written to disk but the image.
	cmd := exec.CommandContext(ctx, "mmdebstrap", "--quiet", "--variant=minbase", "--include=git,ca-certificates",
		"--format=tar", gitImageSuite, "-")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	resp, importErr := cli.ImageImport(ctx, image.ImportSource{Source: out, SourceName: "-"}, GitImage,
		image.ImportOptions{Changes: []string{"LABEL " + testutil.LabelTest + "=image", `CMD ["/bin/sh"]`, "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}})
	if importErr == nil {
		importErr = readProgress(resp)
	}
	_, _ = io.Copy(io.Discard, out) // mmdebstrap never blocks on a refused import
	if err := cmd.Wait(); err != nil {
		if importErr == nil { // a whole-looking stream of a failed run: not the image
			_, _ = cli.ImageRemove(ctx, GitImage, image.RemoveOptions{Force: true})
		}
		return fmt.Errorf("mmdebstrap %s: %v: %s", gitImageSuite, err, strings.TrimSpace(stderr.String()))
	}
	return importErr
}

// readProgress reads an engine's JSON progress stream to its end and
// returns the error it reports, if any.
func readProgress(body io.ReadCloser) error {
	defer body.Close()
	dec := json.NewDecoder(body)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if strings.TrimSpace(msg.Error) != "" {
			return errors.New(msg.Error)
		}
	}
}
