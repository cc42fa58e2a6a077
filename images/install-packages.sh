#!/bin/sh
# Install the Debian packages named in the given lists that are not installed yet.
#   install-packages.sh LIST...
# A list holds package names separated by blanks or newlines; `#` starts a
# comment. On mrc-twin's offline base every package is already there, so
# this touches no network; on a public base it runs apt-get as usual.
set -eu

wanted=$(sed -e 's/#.*//' "$@" | tr -s ' \t' '\n\n' | sed -e '/^$/d' | sort -u)
missing=""
for pkg in $wanted; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
    [ "$status" = installed ] || missing="$missing $pkg"
done

if [ -z "$missing" ]; then
    echo "install-packages: all $(echo "$wanted" | wc -l) packages already installed"
else
    echo "install-packages: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    # shellcheck disable=SC2086  # word splitting intended
    apt-get install -y --no-install-recommends $missing
    apt-get clean
fi
rm -rf /var/lib/apt/lists/*
