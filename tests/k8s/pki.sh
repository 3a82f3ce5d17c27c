#!/usr/bin/env bash
# The cluster's certificates (EC P-256: fast) and the components' kubeconfigs, new each
# bring-up, into $K8S_DIR/pki and $K8S_DIR (run by up.sh).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

new_key() {
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
  chmod 600 "$1"
}
new_cert() { # name, subject, extendedKeyUsage, [subjectAltName]
  local n=$PKI/$1
  new_key "$n.key"
  openssl req -new -key "$n.key" -subj "$2" -out "$n.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$3"
    [ -z "${4:-}" ] || echo "subjectAltName=$4"
  } >"$n.ext"
  openssl x509 -req -in "$n.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -set_serial "0x$(openssl rand -hex 8)" \
    -days 3650 -extfile "$n.ext" -out "$n.crt" 2>/dev/null
  rm -f "$n.csr" "$n.ext"
}
new_key "$PKI/ca.key"
openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=wfa-k8s-ca" -days 3650 -out "$PKI/ca.crt" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
new_cert apiserver "/CN=kube-apiserver" serverAuth \
  "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP,IP:$KUBE_SVC_IP"
new_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
new_cert admin "/O=system:masters/CN=wfa-k8s-admin" clientAuth
new_cert controller-manager "/CN=system:kube-controller-manager" clientAuth
new_cert scheduler "/CN=system:kube-scheduler" clientAuth
new_cert kube-proxy "/CN=system:kube-proxy" clientAuth
new_cert kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
new_cert kubelet "/CN=$NODE_NAME" serverAuth "DNS:$NODE_NAME,DNS:localhost,IP:$NODE_IP,IP:127.0.0.1"
new_key "$PKI/sa.key"
openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null

write_kubeconfig() { # file, user cert name
  local f=$K8S_DIR/$1
  cat >"$f" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: wfa-k8s
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$2.crt")
    client-key-data: $(base64 -w0 "$PKI/$2.key")
contexts:
- name: wfa-k8s
  context: {cluster: wfa-k8s, user: $2}
current-context: wfa-k8s
EOF
  chmod 600 "$f"
}
write_kubeconfig kubeconfig admin
for c in controller-manager scheduler kube-proxy kubelet-client; do
  write_kubeconfig "$c.kubeconfig" "$c"
done
