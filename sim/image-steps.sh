#!/usr/bin/env bash
# The steps the sim's image builders share (sim/engine/build-image.sh, sim/router/build-image.sh), sourced, not run.
# Both images start from one minimal Debian root file system, built once by debootstrap and cached as a tar (one
# recipe: bookworm, minbase, python3 and openssh-client, so a machine debootstraps once), and end alike: an image
# reused, loaded from its tar or built, saved once, and its tag and tar printed.
#   debian_mirror SUITE                          the mirror to debootstrap from (stdout)
#   rootfs_tar_path DIR SUITE VARIANT INCLUDE    the cached tar's path for that recipe (stdout)
#   ensure_rootfs_tar TAR SUITE VARIANT INCLUDE WORK_DIR   debootstrap into WORK_DIR and save TAR, unless TAR exists
#   unpack_rootfs TAR DIR                        the root file system into DIR, without what no image reads
#   finish_image TAG TAR WORK_DIR BUILD          TAG reused, loaded from TAR or built by the function BUILD; TAR
#                                                saved; the two output lines (TAG, TAR) on stdout
# Environment: DEBIAN_MIRROR overrides the mirror. The caller defines log and die.

# The SUITE mirror named in apt's sources (deb822 *.sources or one-line *.list), else Debian's default.
debian_mirror() {
  local suite=$1
  if [[ -n "${DEBIAN_MIRROR:-}" ]]; then
    printf '%s\n' "$DEBIAN_MIRROR"
    return
  fi
  local source mirror=""
  for source in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$source" ]] || continue
    mirror="$(awk -v suite="$suite" 'BEGIN { RS = ""; FS = "\n" }
      { uris = ""; suites = ""; enabled = 1
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); uris = $i }
          if ($i ~ /^Suites:/) { sub(/^Suites:[ \t]*/, "", $i); suites = " " $i " " }
          if ($i ~ /^Enabled:[ \t]*no/) enabled = 0
        }
        if (enabled && index(suites, " " suite " ")) { split(uris, u, " "); print u[1]; exit } }' "$source")"
    [[ -n "$mirror" ]] && break
  done
  if [[ -z "$mirror" ]]; then
    for source in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [[ -f "$source" ]] || continue
      mirror="$(awk -v suite="$suite" '$1 == "deb" { i = 2
          if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
          if ($(i + 1) == suite) { print $i; exit } }' "$source")"
      [[ -n "$mirror" ]] && break
    done
  fi
  printf '%s\n' "${mirror:-http://deb.debian.org/debian}"
}

rootfs_tar_path() {
  local dir=$1 suite=$2 variant=$3 include=$4 key
  key="$(printf 'suite=%s variant=%s include=%s arch=%s\n' "$suite" "$variant" "$include" "$(dpkg --print-architecture)" \
    | sha256sum | cut -c1-16)"
  printf '%s\n' "$dir/$suite-$variant-$key.tar"
}

ensure_rootfs_tar() {
  local tar=$1 suite=$2 variant=$3 include=$4 work=$5 mirror
  [[ -f "$tar" ]] && return
  mirror="$(debian_mirror "$suite")"
  log "debootstrap --variant=$variant --include=$include $suite from $mirror (about a minute)"
  if ! debootstrap --variant="$variant" --include="$include" "$suite" "$work/debootstrap" "$mirror" \
    >"$work/debootstrap.log" 2>&1; then
    tail -n 30 "$work/debootstrap.log" >&2
    die "debootstrap failed (last lines above)"
  fi
  mkdir -p "$(dirname "$tar")"
  tar --numeric-owner -C "$work/debootstrap" -cf "$work/rootfs.tar" .
  # A rename: a concurrent build of the other image sees the whole tar or none.
  mv -f "$work/rootfs.tar" "$tar"
  rm -rf "$work/debootstrap"
  log "cached the root file system: $tar"
}

unpack_rootfs() {
  local tar=$1 rootfs=$2
  mkdir "$rootfs"
  tar --numeric-owner -C "$rootfs" -xpf "$tar"
  # Nothing in the images installs packages or reads docs: drop the downloaded .debs, apt lists, man pages, locales.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
  find "$rootfs/usr/share/doc" -type f ! -name copyright -delete
}

finish_image() {
  local tag=$1 image_tar=$2 work=$3 build=$4
  if docker image inspect "$tag" >/dev/null 2>&1; then
    log "reusing image $tag"
  elif [[ -f "$image_tar" ]]; then
    log "loading $tag from $image_tar"
    docker load -i "$image_tar" >/dev/null
  else
    "$build"
  fi
  if [[ -f "$image_tar" ]]; then
    log "reusing $image_tar"
  else
    log "saving $tag to $image_tar"
    docker save -o "$work/image.tar" "$tag"
    chmod 0644 "$work/image.tar" # docker save writes 0600; the sim copies it to nodes as other users too
    mv -f "$work/image.tar" "$image_tar"
  fi
  log "image $tag: $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1 / 1e6}'), tar $(du -h "$image_tar" | cut -f1)"
  printf '%s\n%s\n' "$tag" "$image_tar"
}
