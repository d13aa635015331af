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
	.venv/bin/python -m kproto.analyze.demo

test:
	scripts/setup.sh --spark --capture --browser --portability --kafka-clients
	scripts/test.sh

test-portable:
	scripts/setup.sh --portability
	scripts/test-portable.sh

# Real Apache Kafka brokers (3.9 and every 4.x line, scripts/install-kafka.sh fetches them from Maven
# Central into ~/.cache/kproto/kafka), started one at a time by tools/kafka_broker.py: the kafka-marked tests.
.PHONY: test-kafka
test-kafka:
	scripts/setup.sh
	scripts/install-kafka.sh
	scripts/install-capture-tools.sh
	scripts/install-clients.sh python node share
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

# The inner loop, without Spark, Java, a browser or capture tools:
#   make quicktest   the codec's tests (messages, headers, primitives, framing, records, versions, API names)
#                    on the Cython extension, under a minute; `make test` before you push
#   make lint        ruff check, the generators' --check, the stub check and the repeat scan
#                    (installs ruff and mypy, the dev extra, into .venv the first time)
#   make distclean   what `make clean` removes, and kproto's cache directory (README, "Caches")
.PHONY: quicktest lint distclean

QUICKTEST = tests/test_primitives.py tests/test_headers.py tests/test_messages.py tests/test_schema.py \
            tests/test_api.py tests/test_eager.py tests/test_materialise.py tests/test_plan_walker.py \
            tests/test_framing.py tests/test_records.py tests/test_compression.py tests/test_versions.py \
            tests/test_api_names.py tests/test_codec_unavailable.py tests/test_docstrings.py

# Less the truncation-at-every-offset sweep (hypothesis searches: 3/4 of the CPU time; make test runs it).
quicktest:
	scripts/setup.sh
	.venv/bin/python -m pytest -q -m "not slow" -k "not truncation_at_every_offset" $(QUICKTEST)

lint:
	scripts/setup.sh
	@.venv/bin/python -c "import ruff, mypy" 2>/dev/null || { \
	  echo "lint: installing ruff and mypy (the dev extra) into .venv ..."; \
	  .venv/bin/python scripts/extra_requirements.py dev | .venv/bin/python -m pip -q --disable-pip-version-check install -r /dev/stdin; }
	.venv/bin/python -m ruff check kproto tools tests scripts setup.py
	.venv/bin/python tools/gen_schema.py --check
	.venv/bin/python tools/gen_walkers.py --check
	.venv/bin/python tools/gen_stubs.py --check
	# mypy (inside check_stubs) must see this checkout's kproto as stubtest imports it: on the path.
	PYTHONPATH=$(CURDIR) .venv/bin/python tools/check_stubs.py
	.venv/bin/python tools/duplicate_scan.py --check

# The cache directory's rule lives in kproto/_common/cache.py (run as a plain file: no venv needed).
distclean:
	@cache=$$(python3 -c 'import runpy; print(runpy.run_path("kproto/_common/cache.py")["cache_root"]())') && \
	  case "$$cache" in ""|/|"$$HOME"|"$$HOME/") echo "distclean: refusing to remove '$$cache'" >&2; exit 1 ;; esac && \
	  echo "distclean: removing $$cache" && rm -rf "$$cache"
	$(MAKE) clean
