// The console's entry point: pages chosen by the URL's #fragment, the cluster line in the header,
// and a refresh every few seconds of the page on screen (never of the Query page).

import { getJson } from "./api.js";
import { refreshLookups } from "./lookups.js";
import { refreshCache, refreshDatasources, refreshIngestion, refreshServers } from "./pages.js";
import { initQueryPage } from "./query_page.js";

const REFRESH_MS = 5000;
// sys.segments and a COUNT(*) per datasource cost the cluster more than a status read: less often
const REFRESH_EVERY = { datasources: 30000, servers: REFRESH_MS, cache: REFRESH_MS, ingestion: REFRESH_MS, lookups: REFRESH_MS };
const PAGES = ["query", "datasources", "servers", "cache", "ingestion", "lookups"];
const REFRESH = {
  datasources: refreshDatasources, servers: refreshServers, cache: refreshCache, ingestion: refreshIngestion, lookups: refreshLookups,
};

let timer = null;
let query = null;

async function refresh(page) {
  const fn = REFRESH[page];
  if (!fn) return;
  const body = document.querySelector(`#page-${page}`);
  body.dataset.loading = "true";
  try {
    await fn();
  } finally {
    delete body.dataset.loading;
    body.dataset.loaded = String(Date.now());
  }
}

function show() {
  const page = PAGES.includes(location.hash.slice(1)) ? location.hash.slice(1) : "query";
  for (const name of PAGES) document.querySelector(`#page-${name}`).hidden = name !== page;
  document.querySelectorAll("#nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === page));
  document.title = `Strata console · ${page[0].toUpperCase()}${page.slice(1)}`;
  clearInterval(timer);
  if (page === "query") {
    query.loadSchema();
    return;
  }
  refresh(page);
  timer = setInterval(() => { if (!document.hidden) refresh(page); }, REFRESH_EVERY[page]);
}

async function clusterLine() {
  const line = document.querySelector("#cluster-line");
  try {
    const status = await getJson("status");
    line.textContent = `broker ${status.version} · ${status.servers} data servers · ${status.segments} segments` +
      (status.inventory && status.inventory.connected === false ? " · inventory disconnected" : "");
  } catch (error) {
    line.textContent = `broker unreachable: ${error.message}`;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  query = initQueryPage();
  document.querySelectorAll("[data-refresh]").forEach((b) => b.addEventListener("click", () => refresh(b.dataset.refresh)));
  window.addEventListener("hashchange", show);
  show();
  clusterLine();
  setInterval(() => { if (!document.hidden) clusterLine(); }, REFRESH_MS * 2);
});
