"""The `strata` command line and what only it uses: settings files, the quickstart cluster, local
server processes, and `strata sql`, the SQL client. It sits on top of every other package."""
