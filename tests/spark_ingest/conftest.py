from tests.ingestion.conftest import stores, tutorial_spec  # noqa: F401
from tests.spark_kit import spark  # noqa: F401
