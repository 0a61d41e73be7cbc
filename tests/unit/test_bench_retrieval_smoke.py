"""The retrieval benchmark on a tiny inline corpus, so that it cannot rot (numbers come from bench/)."""

from __future__ import annotations

import importlib.util

from bench.retrieval.corpus import CORPORA, known_items, page_sections
from bench.retrieval.evaluate import chunks_of, cold_load, run_language

ENGLISH_PAGE = """<html><body><div class="body" role="main">
<h1>Logging howto<a class="headerlink">¶</a></h1><p>Loggers emit records through handlers and filters.</p>
<h2>Rotating log files</h2><p>A handler can switch to a new file when the current one grows past a size
or when a time interval has elapsed. Old files are kept with numbered suffixes.</p>
<h2>Sending records over sockets</h2><p>Records can be pickled and sent to a listening process that
unpickles them and hands them to its own handlers, so that many processes share one log.</p>
<h2>Filtering by level</h2><p>Each logger and handler has a threshold; messages below it are dropped
before any formatting work is done.</p>
</div><div class="sphinxsidebar">Rotating log files</div></body></html>"""

CHINESE_PAGE = """<html><body><div class="navheader">上一页</div>
<h2>1.1. 软件包管理</h2><p>使用命令行工具安装、升级和删除软件包，并且处理依赖关系。</p>
<h3>1.1.1. 网络配置</h3><p>编辑接口文件设置静态地址，然后重新启动网络服务使更改生效。</p>
<h3>1.1.2. 磁盘分区</h3><p>在安装系统之前规划分区大小，把用户数据放在单独的分区里面。</p>
<div class="navfooter">下一页</div></body></html>"""


def test_benchmark_runs_end_to_end_on_a_tiny_corpus() -> None:
    with_bm25s = importlib.util.find_spec("bm25s") is not None and importlib.util.find_spec("Stemmer") is not None
    for language, page in (("en", ENGLISH_PAGE), ("zh", CHINESE_PAGE)):
        sections = page_sections("page.html", page, CORPORA[language])
        assert all("¶" not in s.heading and not s.heading[0].isdigit() for s in sections)
        documents, items = known_items(sections, language, max_queries=10, min_body_chars=20)
        assert items and all(item.query.lower() not in doc.body.lower() for item in items for doc in documents)
        report = run_language(language, documents, items, with_bm25s=with_bm25s)
        assert report["chunks"] >= len(documents)
        for entry in report["systems"].values():
            assert 0.0 <= entry["mrr_at_3"] <= entry["recall_at_3"] <= 1.0
        assert report["systems"]["ours"]["recall_at_3"] > 0
    assert cold_load(chunks_of(documents), size=20, repeats=1)["chunks"] == 20
