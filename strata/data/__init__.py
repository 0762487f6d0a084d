"""Druid's quickstart sample (wikipedia, 2015-09-12), shipped so the quickstart works offline."""

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent
WIKIPEDIA_SAMPLE = DATA_DIR / "wikiticker-2015-09-12-sampled.json.gz"
WIKIPEDIA_INDEX_SPEC = DATA_DIR / "wikipedia-index.json"
