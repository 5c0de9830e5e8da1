# Sourced by the object-storage benchmarks (bench/s3.sh,
# bench/structures_scale.sh), after they set TMP: PIDS, whose processes and
# TMP go at exit; free_port; and start_s3proxy DIR, a loopback s3proxy
# (make s3proxy, its filesystem backend) serving DIR's folders as buckets,
# listening on S3PORT once it returns, with its credentials exported.
JAR=.cache/s3proxy-2.7.0.jar
[ -f "$JAR" ] || make --no-print-directory s3proxy >/dev/null
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start_s3proxy() {
  S3PORT=$(free_port)
  cat >"$TMP/s3proxy.conf" <<CONF
s3proxy.endpoint=http://127.0.0.1:$S3PORT
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=bench
s3proxy.credential=bench-secret
jclouds.provider=filesystem
jclouds.filesystem.basedir=$1
CONF
  java -Xmx1g -jar "$JAR" --properties "$TMP/s3proxy.conf" >"$TMP/s3proxy.log" 2>&1 &
  PIDS+=($!)
  until curl -s -o /dev/null "http://127.0.0.1:$S3PORT"; do sleep 0.2; done
  export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
}
