# shellcheck shell=bash
# spark-llm:network.firewall on a node (spark_llm.plan.firewall): spark-llm's own nftables table, installed and
# removed as one transaction, never touching another table (the user's rules, Docker's). Not run on its own: the
# plan reads it as text (spark_llm.plan.scripts.bash_lib drops this header up to the first empty line).
# `fw_install TABLE` reads the table's body on stdin (it may use $ephemeral: the node's ip_local_port_range, read
# here) and replaces table inet TABLE with it; `fw_remove TABLE` deletes table inet TABLE if it is there. nft needs
# root: a login user other than root runs it with `sudo -n` (no password prompt: a step has no terminal).

fw_nft() {
  if [ "$(id -u)" -eq 0 ]; then
    nft "$@"
  else
    sudo -n nft "$@"
  fi
}

fw_check() {
  # sbin is not on a login user's PATH in every distribution's non-interactive ssh session.
  PATH="$PATH:/usr/sbin:/sbin"
  if ! command -v nft >/dev/null 2>&1; then
    echo "spark-llm:network.firewall: nft is not installed on $(hostname): install the nftables package there" \
      "(sudo apt-get install nftables), or set spark-llm:network.firewall to off" >&2
    return 1
  fi
  if [ "$(id -u)" -ne 0 ] && ! sudo -n true 2>/dev/null; then
    echo "spark-llm:network.firewall: nft needs root, and $(id -un) on $(hostname) cannot run sudo without a" \
      "password: allow it (a sudoers line for $(command -v nft)), or set spark-llm:network.firewall to off" >&2
    return 1
  fi
}

fw_install() {
  local table=$1 low high rules
  fw_check
  read -r low high </proc/sys/net/ipv4/ip_local_port_range
  rules=$(mktemp)
  # One transaction: the table declared (so that the delete finds it), deleted, made anew: no moment without it
  # but for a first install, and nothing outside it touched.
  {
    echo "define ephemeral = $low-$high"
    echo "table inet $table"
    echo "delete table inet $table"
    cat
  } >"$rules"
  if ! fw_nft -f "$rules"; then
    rm -f "$rules"
    echo "spark-llm:network.firewall: nft refused the table inet $table on $(hostname) (above); nothing changed" >&2
    return 1
  fi
  rm -f "$rules"
  echo "spark-llm: nftables table inet $table on $(hostname): the group's ports refused but on the fabric" \
    "(ephemeral ports $low-$high)"
}

fw_remove() {
  local table=$1
  fw_check
  if fw_nft list table inet "$table" >/dev/null 2>&1; then
    fw_nft delete table inet "$table"
    echo "spark-llm: nftables table inet $table removed from $(hostname)"
  fi
}

# What the table is now, for the probe and the step's drift token: a digest of `nft list table inet TABLE`,
# `absent`, or `unknown` (no nft, or no root without a password: nothing can be said).
fw_digest() {
  local table=$1 listing
  PATH="$PATH:/usr/sbin:/sbin"
  command -v nft >/dev/null 2>&1 || { echo unknown; return 0; }
  if [ "$(id -u)" -ne 0 ] && ! sudo -n true 2>/dev/null; then
    echo unknown
  elif listing=$(fw_nft list table inet "$table" 2>/dev/null); then
    printf '%s\n' "$listing" | sha256sum | cut -c1-16
  elif fw_nft list tables >/dev/null 2>&1; then
    echo absent
  else
    echo unknown
  fi
}
