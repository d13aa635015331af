#!/usr/bin/env bash
# Copies artifacts from Maven Central into a directory, through a throw-away pom: the one place
# the install scripts (install-kafka.sh, install-clients.sh) ask Maven for jars.
#
#   scripts/maven-fetch.sh DEST GROUP:ARTIFACT:VERSION...            with their runtime dependencies
#   scripts/maven-fetch.sh --direct DEST GROUP:ARTIFACT:VERSION...   the named jars only
#
# DEST is filled through DEST.partial and renamed at the end, so a cut download leaves no DEST.
# On failure: mvn's ERROR lines on stderr, exit 1; Maven's own cache is ~/.m2.
set -euo pipefail

transitive=true
if [ "${1:-}" = --direct ]; then transitive=false; shift; fi
[ $# -ge 2 ] || { echo "usage: $0 [--direct] DEST GROUP:ARTIFACT:VERSION..." >&2; exit 2; }
dest=$1; shift
command -v mvn >/dev/null 2>&1 || {
  echo "maven-fetch: mvn (Apache Maven) is not on PATH: install it (Debian: apt-get install maven)" >&2; exit 1; }

dependencies=""
for coordinate in "$@"; do
  IFS=: read -r group artifact version <<<"$coordinate"
  [ -n "$group" ] && [ -n "$artifact" ] && [ -n "$version" ] || {
    echo "maven-fetch: '$coordinate' is not GROUP:ARTIFACT:VERSION" >&2; exit 2; }
  dependencies+="<dependency><groupId>$group</groupId><artifactId>$artifact</artifactId><version>$version</version></dependency>"
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kproto.cache</groupId><artifactId>maven-fetch</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>$dependencies</dependencies>
</project>
POM
rm -rf "$dest.partial"
mkdir -p "$dest.partial"
if ! mvn -q -B -f "$work/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
    -DexcludeTransitive=$([ "$transitive" = true ] && echo false || echo true) \
    -DoutputDirectory="$dest.partial" >"$work/mvn.log" 2>&1; then
  echo "maven-fetch: could not fetch $* from Maven Central; mvn said:" >&2
  grep -E "ERROR" "$work/mvn.log" | head -n 8 >&2 || tail -n 20 "$work/mvn.log" >&2
  rm -rf "$dest.partial"
  exit 1
fi
rm -rf "$dest"
mv "$dest.partial" "$dest"
