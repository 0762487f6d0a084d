"""Column names shared by the query language's SQL text and the engine's segment relation."""

TIME_COLUMN = "__time"  # row time, epoch milliseconds as BIGINT
SEGMENT_INDEX = "__segment_index"  # position of the row's segment id among a request's segments
# Position of an unnested row's element, a list (one per unnest, outermost first): among rows of
# one time, the order Druid's cursor reads them in, so `*Last` takes the last element read
ELEMENT_POSITION = "__element_position"
