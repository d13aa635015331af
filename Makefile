# The two commands of the README:
#   make run    set up, then run the main job
#   make test   set up, then run the tests (both implementations)
#   make test-portable   (CI too) the suite on the forced-fallback build (KPROTO_PORTABLE=1)
#   make portability     the cross-compile check, actionlint and cibuildwheel's build list, in full
#   make test-kafka      (CI too) the checks against real Apache Kafka brokers (3.9, 4.0-4.4)
.PHONY: run demo test test-portable portability setup bench clean

setup:
	scripts/setup.sh

run:
	scripts/setup.sh --spark
	.venv/bin/kproto analyze samples/sample.pcap --out out/sample
	@echo "report: out/sample/report.html (also report.md, report.json); tables: out/sample/*/"
	@echo "the kproto command: .venv/bin/kproto (or run: source .venv/bin/activate)"

demo:
	scripts/setup.sh
	.venv/bin/python -m kproto.demo

test:
	scripts/setup.sh --spark --capture --browser --portability --kafka-clients
	scripts/test.sh

test-portable:
	scripts/setup.sh --portability
	scripts/test-portable.sh

# Real Apache Kafka brokers (3.9 and every 4.x line, scripts/install-kafka.sh fetches them from Maven
# Central into ~/.cache/kproto/kafka), started one at a time by tools/kafka_broker.py: the kafka-marked tests, on both implementations.
.PHONY: test-kafka
test-kafka:
	scripts/setup.sh
	scripts/install-kafka.sh
	scripts/install-capture-tools.sh
	scripts/install-clients.sh python node
	# One pass: the oracle and the traffic checks compare both implementations themselves (the
	# twin in the same process, or in a child process), so a second pass under
	# KPROTO_NO_EXTENSIONS=1 would only repeat the brokers and the JVM.
	.venv/bin/python -m pytest -q -m kafka tests

# A Spark standalone master and two workers on 127.0.0.1 (tools/spark_cluster.py), executors in a
# virtualenv holding a wheel of this checkout; the tables must equal local mode's (tests/test_spark_cluster.py).
.PHONY: test-cluster
test-cluster:
	scripts/setup.sh --spark
	.venv/bin/python -m pytest -q -m cluster tests/test_spark_cluster.py

portability:
	scripts/setup.sh --portability
	.venv/bin/python tools/cross_compile_check.py --verbose
	.venv/bin/actionlint .github/workflows/*.yml && echo "actionlint: workflows OK"
	for platform in linux macos windows; do \
	  echo "$$platform:" $$(.venv/bin/cibuildwheel --platform $$platform --print-build-identifiers); done

bench:
	scripts/setup.sh
	.venv/bin/pip -q install -e ".[bench]" --no-build-isolation
	.venv/bin/python -m pytest benchmarks --benchmark-columns=min,median,ops -q

clean:
	rm -rf build .build .venv kproto/_c/*.c kproto/_c/*.so kproto/**/*.so
