"""The data source Spark finds under the format name ``samsa``."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from samsa.errors import ConfigError
from samsa.spark.options import SinkOptions, SourceOptions
from samsa.spark.reader import SamsaBatchReader, SamsaStreamReader
from samsa.spark.rows import source_schema
from samsa.spark.writer import SamsaBatchWriter, SamsaStreamWriter, check_sink_schema

__all__ = ["SamsaDataSource"]


class SamsaDataSource(DataSource):
    """Read and write samsa (or Kafka) topics with the options of Spark's Kafka source.

    Options are checked when Spark asks for a reader or writer, that is while it
    plans the query, so a mistake fails before any task runs.
    """

    @classmethod
    def name(cls) -> str:
        return "samsa"

    def schema(self) -> StructType:
        raw = {k.lower(): v for k, v in self.options.items()}
        include = str(raw.get("includeheaders", "false")).strip().lower()
        if include not in ("true", "false"):
            raise ConfigError(f"option includeHeaders: {include!r} is not true or false")
        return source_schema(include == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        return SamsaBatchReader(SourceOptions.parse(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SamsaStreamReader(SourceOptions.parse(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return SamsaBatchWriter(self._sink_options(schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return SamsaStreamWriter(self._sink_options(schema, overwrite))

    def _sink_options(self, schema: StructType, overwrite: bool) -> SinkOptions:
        if overwrite:
            raise ConfigError(
                "format samsa appends to topics: save mode overwrite is not supported"
            )
        options = SinkOptions.parse(self.options)
        check_sink_schema(schema, options)
        return options
