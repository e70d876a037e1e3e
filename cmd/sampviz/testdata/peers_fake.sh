# A stand-in for python/peers.py's serve mode in cmd/sampviz's tests, run as
# `sh peers_fake.sh serve MODE`: ready answers every request (fixed times;
# an error where the inputs file is missing; a line that is not the
# protocol's before each reply), notorch says torch did not import, silent
# exits without a hello, garbage writes a line that is not JSON and exits,
# badjson a hello that is not JSON; heir leaves a child holding its stdout
# and stderr when it exits, escaped one in a session of its own, and deaf
# never reads its input (heir and escaped write the child's pid to $3).
case "$2" in
heir)
	sleep 300 &
	echo $! >"$3" ;;
escaped)
	setsid sleep 300 &
	echo $! >"$3" ;;
deaf)
	echo '{"ready": true}'
	while :; do sleep 1; done ;;
notorch)
	echo '{"ready": false, "why": "import torch failed: No module named '"'"'torch'"'"'"}'
	exit 0 ;;
silent)
	exit 3 ;;
garbage)
	echo 'Traceback (most recent call last):'
	exit 1 ;;
badjson)
	echo '{ready: yes}'
	exit 0 ;;
esac
echo '{"ready": true, "torch": "2.9.0-fake", "triton": "", "triton_why": "import triton failed: No module named '"'"'triton'"'"'", "device": "Fake GPU", "compile": true}'
while read -r line; do
	name=$(printf '%s' "$line" | sed 's/.*"name":"\([^"]*\)".*/\1/')
	shape=$(printf '%s' "$line" | sed 's/.*"shape":"\([^"]*\)".*/\1/')
	inputs=$(printf '%s' "$line" | sed 's/.*"inputs":"\([^"]*\)".*/\1/')
	echo 'a library printing to stdout'
	if [ ! -f "$inputs" ]; then
		echo '{"error": "FileNotFoundError: '"$inputs"'"}'
		continue
	fi
	echo '{"name": "'"$name"'", "shape": "'"$shape"'", "peers": [{"peer": "torch", "what": "fake eager", "median_us": 300.0, "b2b_us": 310.0}, {"peer": "torch.compile", "error": "compile failed: BackendCompilerFailed: fake"}, {"peer": "triton", "skipped": "no Triton peer"}]}'
done
