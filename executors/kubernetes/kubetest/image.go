package kubetest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"time"
)

// filesLayer is an image layer (a tar) holding files, by path in the
// image.
func filesLayer(files map[string]File) ([]byte, error) {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	dirs := map[string]bool{}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		f := files[p]
		data := f.Data
		if f.Path != "" {
			var err error
			if data, err = os.ReadFile(f.Path); err != nil {
				return nil, err
			}
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o755
		}
		rel := path.Clean(p)[1:]
		for d := path.Dir(rel); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return layer.Bytes(), nil
}

// layer is one image layer: its tar's bytes, size and sha256.
type layer struct {
	r    io.Reader
	size int64
	diff string // "sha256:<hex>"
}

// writeArchive writes a `docker save` archive of a one-layer image to w,
// which `ctr images import` loads: no registry, no builder.
func writeArchive(w io.Writer, name string, l layer, entrypoint []string) error {
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": entrypoint, "Env": []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{l.diff}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": []string{name}, "Layers": []string{"layer.tar"}}})
	if err != nil {
		return err
	}
	aw := tar.NewWriter(w)
	if err := aw.WriteHeader(&tar.Header{Name: "layer.tar", Mode: 0o644, Size: l.size, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	if _, err := io.Copy(aw, l.r); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"config.json", config}, {"manifest.json", manifest}} {
		if err := aw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := aw.Write(f.data); err != nil {
			return err
		}
	}
	return aw.Close()
}

// bytesLayer is a layer of b.
func bytesLayer(b []byte) layer {
	sum := sha256.Sum256(b)
	return layer{r: bytes.NewReader(b), size: int64(len(b)), diff: "sha256:" + hex.EncodeToString(sum[:])}
}

// fileLayer is the layer a tar file holds, opened (the caller closes it).
func fileLayer(path string) (layer, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return layer{}, nil, err
	}
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return layer{}, nil, err
	}
	return layer{r: f, size: size, diff: "sha256:" + hex.EncodeToString(h.Sum(nil))}, f, nil
}
