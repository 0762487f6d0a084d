"""Column names shared by the query language's SQL text and the engine's segment relation."""

TIME_COLUMN = "__time"  # row time, epoch milliseconds as BIGINT
SEGMENT_INDEX = "__segment_index"  # position of the row's segment id among a request's segments
