#!/bin/sh
# Installs the portal into a namespace (default gpu-portal) of the cluster kubectl points at:
#   DATABASE_URL=... REDIS_URL=... ALLOWED_HOSTS=... sh deploy/kubernetes/install.sh [namespace]
# The first time, it creates the Secret gpu-portal-env from those three and a SECRET_KEY and
# PORTAL_ADMIN_PASSWORD made here at random; an existing Secret is left as it is (so a second
# run, e.g. after an upgrade, needs none of the variables). Then it applies the manifests.
# It prints no secret: values reach kubectl on a pipe, never on its command line.
set -eu

ns=${1:-gpu-portal}
here=$(dirname "$0")
secret=gpu-portal-env

fail() {
    echo "install.sh: $*" >&2
    exit 1
}

case $ns in
    '' | *[!a-z0-9-]* | -* | *-) fail "namespace '$ns' is not a DNS label" ;;
esac
# A ClusterRoleBinding names its ServiceAccount's namespace: it cannot come from -n.
grep -q "namespace: $ns}" "$here/rbac.yaml" ||
    fail "rbac.yaml's ClusterRoleBinding names another namespace than '$ns': change it first"

# $1 random bytes in hex: od and /dev/urandom are on every Unix, unlike python3 or openssl.
random_hex() {
    od -A n -t x1 -N "$1" /dev/urandom | tr -d ' \n'
}

kubectl get namespace "$ns" >/dev/null 2>&1 || kubectl create namespace "$ns"

if kubectl -n "$ns" get secret "$secret" >/dev/null 2>&1; then
    echo "Secret $secret exists in $ns: left as it is (kubectl -n $ns edit secret $secret)."
else
    nl='
'
    for name in DATABASE_URL REDIS_URL ALLOWED_HOSTS; do
        eval "value=\${$name:-}"
        [ -n "$value" ] || fail "$name is not set: the Secret $secret needs it the first time"
        case $value in *"$nl"*) fail "$name holds a newline" ;; esac
    done
    key=$(random_hex 32)
    password=$(random_hex 16)
    [ "${#key}" -eq 64 ] && [ "${#password}" -eq 32 ] || fail "could not read /dev/urandom"
    # printf is a shell builtin: the values stay off every command line (ps shows those).
    printf '%s=%s\n' DATABASE_URL "$DATABASE_URL" REDIS_URL "$REDIS_URL" \
        ALLOWED_HOSTS "$ALLOWED_HOSTS" SECRET_KEY "$key" PORTAL_ADMIN_PASSWORD "$password" |
        kubectl -n "$ns" create secret generic "$secret" --from-env-file=/dev/stdin >/dev/null
    echo "Secret $secret created in $ns. The password of the portal's user admin:"
    printf '  %s \\\n    %s\n' "kubectl -n $ns get secret $secret" \
        "-o jsonpath='{.data.PORTAL_ADMIN_PASSWORD}' | base64 -d"
fi

kubectl -n "$ns" apply -f "$here/"
