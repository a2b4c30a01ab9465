#!/bin/bash
# A two-node MPI run on one machine: rank 0 in network namespace A, ranks 1 and 2 in namespace B,
# joined by a veth pair; Open MPI talks TCP between them (btl tcp,self) and mpirun (inside A) starts
# B's daemon through a launch agent that enters B instead of ssh. B also gets its own mount namespace
# with an empty tmpfs over the model's directory: the model file is visible to rank 0 only, as on
# nodes without a shared file system.
#
# Usage: tests/mpi/netns.sh TEST_MPI MODEL_DIR [test_mpi arguments after MODEL...]
# Prints test_mpi's output (run with --hidden MODEL/model.safetensors). Exits 77 when this machine
# does not permit `ip netns add` (not root, or a container without CAP_SYS_ADMIN), else test_mpi's status.
set -u
if [ $# -lt 2 ]; then echo "usage: $0 TEST_MPI MODEL_DIR [args...]" >&2; exit 2; fi
bin=$(realpath "$1") model=$(realpath "$2")
shift 2
id=$$
ns_a=gpt2mpi-a-$id ns_b=gpt2mpi-b-$id veth_a=gpa$id veth_b=gpb$id
addr_a=10.77.0.1 addr_b=10.77.0.2 # private to the two namespaces: no clash with the host's networks

if ! ip netns add "$ns_a" 2>/dev/null; then
    echo "ip netns add is not permitted here (needs root with CAP_SYS_ADMIN): multi-namespace test skipped"
    exit 77
fi
tmp=$(mktemp -d /tmp/gpt2-mpi-netns.XXXXXX)
cleanup() {
    ip netns del "$ns_a" 2>/dev/null
    ip netns del "$ns_b" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

set -e
ip netns add "$ns_b"
ip link add "$veth_a" type veth peer name "$veth_b"
ip link set "$veth_a" netns "$ns_a"
ip link set "$veth_b" netns "$ns_b"
ip -n "$ns_a" addr add "$addr_a/24" dev "$veth_a"
ip -n "$ns_b" addr add "$addr_b/24" dev "$veth_b"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$veth_a" up
ip -n "$ns_b" link set "$veth_b" up

# the model, in a directory that B will see empty
mkdir "$tmp/model"
cp "$model/config.json" "$model/model.safetensors" "$tmp/model/"

# mpirun calls the agent as: agent HOST ORTED-COMMAND... (words meant for a remote shell)
cat > "$tmp/agent.sh" <<EOF
#!/bin/sh
host=\$1
shift
case "\$host" in
$addr_a) exec ip netns exec $ns_a sh -c "\$*" ;;
$addr_b) exec ip netns exec $ns_b unshare --mount --uts sh -c 'hostname gpt2-node-b && mount -t tmpfs gpt2-hidden "\$0" && exec sh -c "\$1"' "$tmp/model" "\$*" ;;
*) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
EOF
chmod +x "$tmp/agent.sh"
printf '%s slots=1\n%s slots=2\n' "$addr_a" "$addr_b" > "$tmp/hosts"
set +e

ip netns exec "$ns_a" unshare --uts sh -c 'hostname gpt2-node-a && exec "$@"' sh timeout 60 mpirun --allow-run-as-root -np 3 --hostfile "$tmp/hosts" \
    --mca plm_rsh_agent "$tmp/agent.sh" --mca plm_rsh_no_tree_spawn 1 \
    --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
    --bind-to none -x OMP_NUM_THREADS=1 "$bin" "$tmp/model" "$@" --hidden "$tmp/model/model.safetensors"
