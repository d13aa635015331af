# The two commands of the README:
#   make run    set up, then run the main job
#   make test   set up, then run the tests (both implementations)
.PHONY: run demo test setup bench clean

setup:
	scripts/setup.sh

run:
	scripts/setup.sh --spark
	.venv/bin/kproto analyze samples/sample.pcap --out out/sample
	@echo "report: out/sample/report.html (also report.md, report.json); tables: out/sample/*/"

demo:
	scripts/setup.sh
	.venv/bin/python -m kproto.demo

test:
	scripts/setup.sh --spark --capture
	scripts/test.sh

bench:
	scripts/setup.sh
	.venv/bin/pip -q install -e ".[bench]" --no-build-isolation
	.venv/bin/python -m pytest benchmarks --benchmark-columns=min,median,ops -q

clean:
	rm -rf build .venv kproto/_c/*.c kproto/_c/*.so kproto/**/*.so
