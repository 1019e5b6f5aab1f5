#!/bin/bash
# One locked lab session: deploy the tiny model as an mp PP=2 replica over lab1+lab2 with
# `vfleet deploy` (the real path), smoke the head, deploy again (must change nothing), then
# restore the single-host demo deployment the other users expect.
set -u
S="ssh -i /var/lib/vfleet-lab/id_ed25519 -o UserKnownHostsFile=/var/lib/vfleet-lab/known_hosts -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes -o ConnectTimeout=5"
OUT=/tmp/rlab/out; rm -rf $OUT; mkdir -p $OUT
cd /work/wt-ray
date -u +%T > $OUT/t_start
timeout 300 /work/main/.venv/bin/python -m vfleet.cli deploy -i /tmp/rlab/inv.yaml --limit lab1,lab2 --report $OUT/deploy.json > $OUT/deploy.log 2>&1; echo "deploy rc=$?" >> $OUT/deploy.log
date -u +%T > $OUT/t_deployed
KEY=$(cat /var/lib/vfleet-lab/demo/api_key)
curl -s -m 60 -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' http://10.213.0.11:8000/v1/completions -d '{"model":"tiny","prompt":"Hello","max_tokens":8}' > $OUT/completion.json 2>&1
for h in 10.213.0.11 10.213.0.12; do $S root@$h "systemctl status vllm --no-pager | head -5; cat /etc/systemd/system/vllm.service; journalctl -u vllm --no-pager -n 150 -o cat" > $OUT/journal-$h.txt 2>&1; done
timeout 120 /work/main/.venv/bin/python -m vfleet.cli deploy -i /tmp/rlab/inv.yaml --limit lab1,lab2 --skip-preflight --report $OUT/deploy2.json > $OUT/deploy2.log 2>&1; echo "deploy2 rc=$?" >> $OUT/deploy2.log
date -u +%T > $OUT/t_second
timeout 150 /work/main/.venv/bin/python -m vfleet.cli deploy -i /var/lib/vfleet-lab/demo/deploy.yaml --limit lab1,lab2 --skip-preflight > $OUT/restore.log 2>&1; echo "restore rc=$?" >> $OUT/restore.log
date -u +%T > $OUT/t_end
