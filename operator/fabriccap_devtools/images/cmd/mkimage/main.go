// mkimage packs static binaries into a single-layer image for this machine's architecture and
// writes it as a docker-save tarball that `ctr -n k8s.io images import` accepts. No registry,
// no daemon. Files get mode 0755 and mtime 0, so the same binaries give the same image digest.
//
//	mkimage -o pause.tar -tag fabriccap.local/pause:3.10 -file out/pause:/pause -entrypoint /pause
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var files, entrypoint, env multiFlag
	out := flag.String("o", "", "output tarball")
	tag := flag.String("tag", "", "image reference, e.g. fabriccap.local/pause:3.10")
	flag.Var(&files, "file", "SRC:DEST (repeatable); DEST is an absolute path in the image, mode 0755")
	flag.Var(&entrypoint, "entrypoint", "entrypoint argv element (repeatable)")
	flag.Var(&env, "env", "KEY=VALUE (repeatable)")
	flag.Parse()
	if *out == "" || *tag == "" || len(files) == 0 {
		log.Fatal("usage: mkimage -o OUT.tar -tag REF -file SRC:DEST [-file ...] [-entrypoint ARG ...] [-env K=V ...]")
	}
	ref, err := name.NewTag(*tag)
	if err != nil {
		log.Fatalf("bad tag: %v", err)
	}
	layerTar, err := buildTar(files)
	if err != nil {
		log.Fatal(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		log.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		log.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	// Without OS/architecture, ctr import (which filters by the host platform) drops the image.
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config.Entrypoint = entrypoint
	cfg.Config.Env = append([]string{"PATH=/"}, env...)
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := tarball.WriteToFile(*out, ref, img); err != nil {
		log.Fatal(err)
	}
	digest, _ := img.Digest()
	fmt.Printf("%s %s %s\n", *out, ref, digest)
}

// buildTar makes a reproducible layer: fixed mtimes, root-owned, parents created.
func buildTar(files []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	for _, spec := range files {
		src, dest, ok := strings.Cut(spec, ":")
		if !ok || !strings.HasPrefix(dest, "/") {
			return nil, fmt.Errorf("bad -file %q: want SRC:/DEST", spec)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		rel := strings.TrimPrefix(dest, "/")
		parts := strings.Split(rel, "/")
		for i := 1; i < len(parts); i++ {
			d := strings.Join(parts[:i], "/") + "/"
			if !dirs[d] {
				dirs[d] = true
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
					return nil, err
				}
			}
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o755, Size: int64(len(data)), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
