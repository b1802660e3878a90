#!/bin/sh
# Re-vendor the dashboard's one chart library from its npm package (run by hand when upgrading; no Node is
# needed to install or run Atoll). Pinned version and sha256 of the npm tarball; the files it copies are
# committed with the package's LICENSE under engine/dashboard/static/vendor/.
#   tools/vendor_js.sh            # fetch uplot@$VERSION with `npm pack`, check the sha256, copy dist files
set -eu
NAME=uplot
VERSION=1.6.32
SHA256=4b8a8191e425658e3ea8c8c1314b0fc679c861ee3a1af2b20c7b16ba50b5133d
DEST="$(cd "$(dirname "$0")/.." && pwd)/engine/dashboard/static/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack --silent "$NAME@$VERSION" >/dev/null
echo "$SHA256  $NAME-$VERSION.tgz" | sha256sum -c -
tar xzf "$NAME-$VERSION.tgz"
mkdir -p "$DEST"
cp package/dist/uPlot.iife.min.js package/dist/uPlot.min.css "$DEST/"
cp package/LICENSE "$DEST/uPlot.LICENSE"
printf '%s %s (npm), tarball sha256 %s\n' "$NAME" "$VERSION" "$SHA256" > "$DEST/VERSIONS"
( cd "$DEST" && sha256sum uPlot.iife.min.js uPlot.min.css uPlot.LICENSE >> VERSIONS )
echo "vendored $NAME $VERSION into $DEST"
