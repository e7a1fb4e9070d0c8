package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/profiles"
)

// defaultPath is the PATH the engine gives a container whose image sets
// none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Preflight implements executors.Preflighter: the image is on the engine,
// and the agent command is found inside it, on the image's PATH (a
// relative path from the agent's working directory, or the image's),
// with the credential variable the user named set in the environment the
// container gets. The binary is looked up in a container created from
// the image and never started (a stat through the engine's archive API:
// no shell needed in the image, nothing runs), removed at once.
func (e *Executor) Preflight(ctx context.Context, spec executors.Spec) error {
	if spec.Image == "" {
		return errdefs.RequiredField("image")
	}
	img, err := e.inspectImage(ctx, spec.Image)
	if err != nil {
		return err
	}
	if spec.Agent == nil {
		return nil
	}
	imagePath, workDir := defaultPath, "/"
	if c := img.Config; c != nil {
		for _, kv := range c.Env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				imagePath = v
			}
		}
		if c.WorkingDir != "" {
			workDir = c.WorkingDir
		}
	}
	if spec.Agent.WorkDir != "" {
		workDir = spec.Agent.WorkDir
	}
	// The container's environment is the agent's allowlist without the
	// base variables (containerEnv), so its PATH is the image's.
	environ := append(containerEnv(spec), "PATH="+imagePath)

	var probe string
	defer func() {
		if probe != "" {
			_ = e.cli.ContainerRemove(context.WithoutCancel(ctx), probe, container.RemoveOptions{Force: true})
		}
	}()
	exists := func(p string) error {
		if probe == "" {
			created, err := e.cli.ContainerCreate(ctx, &container.Config{Image: spec.Image, Entrypoint: []string{"/nonexistent"},
				Labels: map[string]string{LabelManaged: "true", LabelOrchestrator: e.opts.OrchestratorID}}, nil, nil, nil, "")
			if err != nil {
				return fmt.Errorf("create a container to look in %s: %w", spec.Image, err)
			}
			probe = created.ID
		}
		return e.executableIn(ctx, probe, p)
	}
	return profiles.PreflightWith(spec.Agent.ProfileSpec(), workDir, environ, exists)
}

// inspectImage returns the image, which must be on the engine.
func (e *Executor) inspectImage(ctx context.Context, ref string) (image.InspectResponse, error) {
	img, err := e.cli.ImageInspect(ctx, ref)
	if client.IsErrNotFound(err) {
		return img, errdefs.FailedPrecondition("image %q is not on this Docker engine; pull or build it first", ref)
	} else if err != nil {
		return img, fmt.Errorf("Docker engine: %w: %w", err, errdefs.ErrUnavailable)
	}
	return img, nil
}

// executableIn reports whether p is an executable file in container id,
// following one symbolic link.
func (e *Executor) executableIn(ctx context.Context, id, p string) error {
	st, err := e.cli.ContainerStatPath(ctx, id, p)
	if err != nil {
		return err
	}
	if st.Mode&os.ModeSymlink != 0 && st.LinkTarget != "" {
		target := st.LinkTarget
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(p), target)
		}
		if st, err = e.cli.ContainerStatPath(ctx, id, target); err != nil {
			return err
		}
	}
	if st.Mode.IsDir() || st.Mode&0o111 == 0 {
		return errors.New("not executable")
	}
	return nil
}
