"""Search: ranking, filters, query syntax, multilingual matching, by-tag, tags and stats.

Real vaults in tmp_path and a real Whoosh index, through `Vault.search` and
`memfile search` (click's CliRunner).
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest
from helpers import fails, in_vault, ok, run

from memfile import InvalidInput, Vault

# --- helpers -----------------------------------------------------------------------------------


def search_json(root: Path, *args: str) -> list[dict]:
    return json.loads(ok(in_vault(root, "search", "--json", *args)).stdout)


def keys(hits: list) -> list[str]:
    """The keys of Vault.search hits or of `search --json` objects, in rank order."""
    return [h["key"] if isinstance(h, dict) else h.memory.key for h in hits]


def found(vault: Vault, query: str, **filters) -> list[str]:
    return keys(vault.search(query, **filters))


def hand_file(
    root: Path,
    category: str,
    key: str,
    content: str,
    *,
    mind: str = "michael",
    tags: str = "",
    updated: str = "2026-01-01T00:00:00Z",
    expires: str = "null",
    priority: str = "normal",
    source: str = "user",
    verified: str = "true",
) -> Path:
    """A memory file written by hand (no memfile command), with chosen timestamps."""
    path = root / mind / category / f"{key}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\nid: mem_{key[:12]:_<12}\ncategory: {category}\nkey: {key}\npriority: {priority}\n"
        f"tags: [{tags}]\nsource: {source}\nverified: {verified}\nconfidence: 1.0\nexpires_at: {expires}\n"
        f"created_at: 2025-01-01T00:00:00Z\nupdated_at: {updated}\n---\n{content}\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def deploys(vault: Vault) -> Vault:
    """A small vault about servers and deployments, with one unrelated memory."""
    vault.store(
        "fact",
        "vps1_server",
        "Synapse v1.5 was deployed on vps1 with docker compose.",
        tags=["docker", "vps1"],
        priority="high",
    )
    vault.store("skill", "deploy_guide", "How to run the deployment pipeline: deploying is easy.", tags=["docker"])
    vault.store("preference", "favorite_food", "Michael likes pho and fresh spring rolls.", tags=["food"])
    return vault


# --- ranking -----------------------------------------------------------------------------------


def test_memory_sharing_more_query_words_ranks_higher(vault: Vault) -> None:
    vault.store("note", "one_word", "postgres is the main database of the team")
    vault.store("note", "three_words", "postgres backup runs nightly at two")
    vault.store("note", "two_words", "the postgres backup is kept for a week")
    assert found(vault, "postgres backup nightly") == ["three_words", "two_words", "one_word"]


def test_a_huge_memory_is_found_by_the_words_of_its_first_256_kib(vault: Vault) -> None:
    """Search indexes the first INDEXED_CHARS of a content (a store of 10 MB of distinct words held a
    server's worker for a minute); the memory itself stays whole."""
    from memfile.index.store import INDEXED_CHARS

    content = "zeppelin " + "filler words " * (INDEXED_CHARS // 13) + "submarine at the end"
    assert len(content) > INDEXED_CHARS
    vault.store("note", "huge", content)
    hits = vault.search("zeppelin")
    assert [h.memory.key for h in hits] == ["huge"] and "**zeppelin**" in hits[0].snippet
    assert vault.search("submarine") == []  # past the indexed part
    assert vault.get("note/huge").content == content  # the file, show and recall keep every word
    vault.store("note", "small", "a submarine in a small memory")
    assert [h.memory.key for h in vault.search("submarine")] == ["small"]


def test_a_2_mb_memory_is_answered_as_an_excerpt_by_every_face(tmp_path: Path) -> None:
    """A hit carries the snippet and the content's first 1,000 characters (docs/search.md), cut between words,
    with `content_cut` and the whole length (one 9.5 MB memory made `search?q=word` answer 9.9 MB):
    through HTTP, MCP (mounted at /mcp) and the CLI; `show` and `Vault.search`'s Memory stay whole."""
    import anyio
    import httpx2
    from helpers import DEADLINE
    from helpers.serve import make_setup, start_server
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    setup = make_setup(tmp_path)
    content = "walrus " + "tusked mammals of the arctic sea " * (2_000_000 // 33) + "the end"
    with Vault.open(setup.root, "michael") as vault:
        vault.store("fact", "walrus", content)
        assert vault.search("walrus")[0].memory.content == content
    token = setup.tokens["michael"]

    def small_hits(hits: list[dict]) -> dict:
        assert [hit["key"] for hit in hits] == ["walrus"]
        hit = hits[0]
        assert hit["content_cut"] is True and hit["content_chars"] == len(content)
        assert len(hit["content"]) <= 1000 and content.startswith(hit["content"] + " ")
        assert "**walrus**" in hit["snippet"]
        return hit

    answer = ok(in_vault(setup.root, "search", "--json", "walrus"))
    assert len(answer.stdout) < 5000
    small_hits(json.loads(answer.stdout))
    assert len(ok(in_vault(setup.root, "show", "--json", "fact/walrus")).stdout) > len(content)

    async def over_mcp() -> tuple[int, dict]:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=DEADLINE) as http:
            async with streamable_http_client(server.url + "/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    result = await session.call_tool("search", {"query": "walrus"})
        return len(result.model_dump_json()), result.structured_content

    server = start_server(setup)
    try:
        served = server.request("GET", "/memory/search?q=walrus", token)
        assert served.status == 200 and len(served.body) < 5000
        assert small_hits(served.json())["mind_id"] == "michael"
        size, structured = anyio.run(over_mcp)
        assert size < 10_000
        small_hits(structured["result"])
        assert server.request("GET", "/memory/walrus", token).json()["content"] == content
    finally:
        server.stop()


def test_filters_in_a_query_take_any_case_and_refuse_a_value_no_memory_has(vault: Vault) -> None:
    vault.store("fact", "keeper", "The lighthouse keeper", priority="high")
    vault.store("note", "visit", "We visited the lighthouse")
    for query in ("lighthouse category:FACT", "lighthouse category:Fact", "lighthouse priority:HIGH"):
        assert [h.memory.key for h in vault.search(query)] == ["keeper"], query
    assert [h.memory.key for h in vault.search("lighthouse NOT category:FACT")] == ["visit"]
    with pytest.raises(InvalidInput) as caught:
        vault.search("lighthouse category:bogus")
    assert "query filter category:" in str(caught.value) and "identity, preference, fact" in str(caught.value)
    assert "verified" in str(fails(in_vault(vault.root, "search", "lighthouse verified:maybe"), 2).stderr)


def test_word_in_key_is_found(vault: Vault) -> None:
    vault.store("fact", "kubernetes_cluster", "three nodes in Frankfurt")
    vault.store("fact", "other", "nothing relevant here")
    assert found(vault, "kubernetes") == ["kubernetes_cluster"]


def test_word_in_tags_is_found(vault: Vault) -> None:
    vault.store("fact", "infra", "three nodes in Frankfurt", tags=["terraform"])
    vault.store("fact", "other", "nothing relevant here")
    assert found(vault, "terraform") == ["infra"]


def test_key_match_ranks_above_content_match(vault: Vault) -> None:
    vault.store("fact", "redis_cache", "settings of the cache layer in production")
    vault.store("fact", "stack_notes", "redis is used somewhere in the production stack")
    assert found(vault, "redis") == ["redis_cache", "stack_notes"]


def test_tag_match_adds_to_content_match(vault: Vault) -> None:
    vault.store("fact", "with_tag", "grafana dashboards for the api", tags=["grafana"])
    vault.store("fact", "without_tag", "grafana dashboards for the api")
    hits = vault.search("grafana")
    assert keys(hits) == ["with_tag", "without_tag"]
    assert hits[0].score > hits[1].score


def test_natural_language_question_finds_memories_sharing_its_words(deploys: Vault) -> None:
    hits = found(deploys, "what did we deploy on vps1?")
    assert hits[0] == "vps1_server"
    assert "deploy_guide" in hits
    assert "favorite_food" not in hits


def test_natural_language_question_through_cli(deploys: Vault) -> None:
    hits = search_json(deploys.root, "what", "did", "we", "deploy", "on", "vps1?")
    assert keys(hits)[0] == "vps1_server"
    assert "favorite_food" not in keys(hits)


def test_query_of_only_stop_words_is_bad_input(deploys: Vault) -> None:
    with pytest.raises(InvalidInput) as caught:
        deploys.search("what did we do?")
    assert caught.value.field == "query"


def test_query_of_only_stop_words_exits_2(deploys: Vault) -> None:
    result = fails(in_vault(deploys.root, "search", "what", "is", "the"), 2)
    assert "query" in result.stderr
    assert "stop words" in result.stderr


def test_unparseable_query_exits_2_without_traceback(deploys: Vault) -> None:
    result = fails(in_vault(deploys.root, "search", "("), 2)
    assert "query" in result.stderr


def test_trailing_question_mark_is_not_a_wildcard(vault: Vault) -> None:
    vault.store("fact", "host", "the host is called vps1 and runs a boat app")
    assert found(vault, "vps?") == []
    assert found(vault, "boa?") == []
    assert found(vault, "vps1?") == ["host"]
    assert found(vault, "boat?") == ["host"]


def test_question_mark_alone_is_bad_input(vault: Vault) -> None:
    vault.store("fact", "host", "vps1")
    fails(in_vault(vault.root, "search", "?"), 2)


# --- filters -----------------------------------------------------------------------------------


@pytest.fixture
def servers(vault: Vault) -> Vault:
    """Six memories that all mention docker, differing in tags, category, priority, source, expiry."""
    vault.store("fact", "docker_host", "docker runs on vps1", tags=["docker", "vps1"], priority="high")
    vault.store("skill", "docker_deploy", "deploy with docker compose", tags=["docker"], source="agent")
    vault.store("project", "docker_migration", "move docker volumes", tags=["vps1"], priority="low")
    vault.store("context", "docker_old", "the old docker setup", expires="2020-01-01")
    vault.store("note", "docker_tips", "docker tips and tricks", tags=["Docker", "tips"])
    vault.store("mistake", "docker_prune", "docker system prune removed a volume", priority="critical")
    return vault


def test_tag_filter_keeps_memories_with_that_tag(servers: Vault) -> None:
    assert sorted(found(servers, "docker", tags=["docker"])) == ["docker_deploy", "docker_host", "docker_tips"]


def test_repeated_tag_filter_requires_all_tags(servers: Vault) -> None:
    assert found(servers, "docker", tags=["docker", "vps1"]) == ["docker_host"]


def test_tag_filter_is_case_insensitive(servers: Vault) -> None:
    assert sorted(found(servers, "docker", tags=["DOCKER", "Tips"])) == ["docker_tips"]


def test_category_filter(servers: Vault) -> None:
    assert found(servers, "docker", category="skill") == ["docker_deploy"]


def test_priority_filter(servers: Vault) -> None:
    assert found(servers, "docker", priority="critical") == ["docker_prune"]


def test_source_filter(servers: Vault) -> None:
    assert found(servers, "docker", source="agent") == ["docker_deploy"]


def test_unverified_filter(servers: Vault) -> None:
    assert found(servers, "docker", unverified=True) == ["docker_deploy"]


def test_expired_memories_are_hidden_by_default(servers: Vault) -> None:
    assert "docker_old" not in found(servers, "docker")


def test_include_expired_shows_expired_memories(servers: Vault) -> None:
    assert "docker_old" in found(servers, "docker", include_expired=True)


def test_filters_through_cli(servers: Vault) -> None:
    root = servers.root
    assert keys(search_json(root, "docker", "--tag", "docker", "--tag", "vps1")) == ["docker_host"]
    assert keys(search_json(root, "docker", "--category", "project")) == ["docker_migration"]
    assert keys(search_json(root, "docker", "--priority", "low")) == ["docker_migration"]
    assert keys(search_json(root, "docker", "--source", "agent")) == ["docker_deploy"]
    assert keys(search_json(root, "docker", "--unverified")) == ["docker_deploy"]
    assert "docker_old" not in keys(search_json(root, "docker"))
    assert "docker_old" in keys(search_json(root, "docker", "--include-expired"))


def test_limit_defaults_to_10(vault: Vault) -> None:
    for n in range(12):
        hand_file(vault.root, "note", f"lamp_{n:02d}", f"the lamp number {n}")
    assert len(vault.search("lamp")) == 10
    assert len(search_json(vault.root, "lamp")) == 10


def test_limit_option(vault: Vault) -> None:
    for n in range(5):
        hand_file(vault.root, "note", f"lamp_{n:02d}", f"the lamp number {n}")
    assert len(vault.search("lamp", limit=3)) == 3
    hits = search_json(vault.root, "lamp", "--limit", "2")
    assert [h["rank"] for h in hits] == [1, 2]


@pytest.mark.parametrize(
    ("option", "value", "field"),
    [
        ("--category", "gossip", "category"),
        ("--priority", "urgent", "priority"),
        ("--source", "robot", "source"),
        ("--limit", "0", "limit"),
    ],
)
def test_invalid_filter_value_exits_2_naming_the_field(deploys: Vault, option: str, value: str, field: str) -> None:
    result = fails(in_vault(deploys.root, "search", "docker", option, value), 2)
    assert f"invalid {field}" in result.stderr
    assert value in result.stderr


@pytest.mark.parametrize(
    ("name", "value"), [("category", "gossip"), ("priority", "urgent"), ("source", "robot"), ("limit", 0)]
)
def test_invalid_filter_value_is_invalid_input_with_field(deploys: Vault, name: str, value: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        deploys.search("docker", **{name: value})
    assert caught.value.field == name


# --- power syntax ------------------------------------------------------------------------------


def test_exact_phrase_matches_only_adjacent_words(vault: Vault) -> None:
    vault.store("skill", "adjacent", "run docker compose up on the host")
    vault.store("skill", "apart", "compose a docker image, then push it")
    assert found(vault, '"docker compose"') == ["adjacent"]


def test_and_requires_both_words(vault: Vault) -> None:
    vault.store("fact", "both", "redis and kafka run together")
    vault.store("fact", "redis_only", "redis alone")
    vault.store("fact", "kafka_only", "kafka alone")
    assert found(vault, "redis AND kafka") == ["both"]


def test_or_accepts_either_word(vault: Vault) -> None:
    vault.store("fact", "redis_only", "redis alone")
    vault.store("fact", "kafka_only", "kafka alone")
    vault.store("fact", "neither", "nothing here")
    assert sorted(found(vault, "redis OR kafka")) == ["kafka_only", "redis_only"]


def test_and_not_excludes_a_word(vault: Vault) -> None:
    vault.store("fact", "both", "redis and kafka run together")
    vault.store("fact", "redis_only", "redis alone")
    assert found(vault, "redis AND NOT kafka") == ["redis_only"]


def test_phrase_and_not_as_in_readme(vault: Vault) -> None:
    vault.store("skill", "deploy", "docker compose up -d on vps1")
    vault.store("skill", "backup", "docker compose exec db pg_dump for the backup")
    assert found(vault, '"docker compose" AND NOT backup') == ["deploy"]


def test_prefix_finds_words_starting_with_it(vault: Vault) -> None:
    vault.store("fact", "kube", "kubernetes cluster")
    vault.store("fact", "other", "kube is short")
    vault.store("fact", "neither", "a cube")
    assert sorted(found(vault, "kube*")) == ["kube", "other"]


def test_prefix_reaches_stemmed_words(vault: Vault) -> None:
    vault.store("fact", "past", "v1.5 deployed yesterday")
    vault.store("fact", "noun", "the deployment failed")
    vault.store("fact", "other", "nothing here")
    assert sorted(found(vault, "deploy*")) == ["noun", "past"]


def test_tag_field_query_matches_tags_only(vault: Vault) -> None:
    vault.store("fact", "tagged", "runs the containers", tags=["docker"])
    vault.store("fact", "mentions", "docker is mentioned but not tagged")
    assert found(vault, "tag:docker") == ["tagged"]


def test_category_field_query(vault: Vault) -> None:
    vault.store("project", "apollo", "the apollo project")
    vault.store("fact", "apollo_fact", "apollo was a space program")
    assert found(vault, "category:project") == ["apollo"]
    assert found(vault, "apollo AND category:fact") == ["apollo_fact"]


def test_power_syntax_through_cli(deploys: Vault) -> None:
    root = deploys.root
    assert keys(search_json(root, '"docker compose"')) == ["vps1_server"]
    assert keys(search_json(root, "tag:docker", "AND", "vps1")) == ["vps1_server"]
    assert keys(search_json(root, "category:skill")) == ["deploy_guide"]
    assert sorted(keys(search_json(root, "deploy*"))) == ["deploy_guide", "vps1_server"]


# --- multilingual ------------------------------------------------------------------------------


def test_stemming_deploying_finds_deployed(vault: Vault) -> None:
    vault.store("fact", "release", "v1.5 was deployed on Friday")
    assert found(vault, "deploying") == ["release"]


def test_stemming_deployed_finds_deploying(vault: Vault) -> None:
    vault.store("fact", "release", "we are deploying on Friday")
    assert found(vault, "deployed") == ["release"]


def test_unaccented_query_finds_vietnamese(vault: Vault) -> None:
    vault.store("preference", "restaurant", "Nhà hàng Phở Hà Nội on Kantstraße")
    assert found(vault, "nha hang") == ["restaurant"]
    assert found(vault, "pho ha noi") == ["restaurant"]


def test_accented_query_finds_unaccented_text(vault: Vault) -> None:
    vault.store("preference", "restaurant", "nha hang pho ha noi")
    assert found(vault, "Nhà hàng") == ["restaurant"]


def test_cafe_finds_cafe_with_accent(vault: Vault) -> None:
    vault.store("preference", "coffee", "Le café de Flore in Paris")
    assert found(vault, "cafe") == ["coffee"]
    assert found(vault, "CAFÉ") == ["coffee"]


@pytest.mark.parametrize("content_form", ["NFC", "NFD"])
@pytest.mark.parametrize("query_form", ["NFC", "NFD"])
@pytest.mark.parametrize("query", ["Nhà hàng", "nha hang", "café", "cafe", "Phở"])
def test_nfc_and_nfd_forms_of_content_and_query(vault: Vault, content_form: str, query_form: str, query: str) -> None:
    content = unicodedata.normalize(content_form, "Nhà hàng Phở, then a café")
    hand_file(vault.root, "note", "mixed", content)
    assert content.encode("utf-8") in (vault.root / "michael" / "note" / "mixed.md").read_bytes()
    assert found(vault, unicodedata.normalize(query_form, query)) == ["mixed"]


def test_nfd_content_stored_through_vault_is_found(vault: Vault) -> None:
    vault.store("note", "decomposed", unicodedata.normalize("NFD", "Đà Nẵng và Huế"))
    assert found(vault, "da nang") == ["decomposed"]
    assert found(vault, unicodedata.normalize("NFD", "Huế")) == ["decomposed"]


THAI = "สวัสดีครับ ขอบคุณครับ"


@pytest.mark.parametrize("query", ["สวัสดี", "ขอบคุณ", "ครับ", "วัส", "ดีค"])
def test_thai_found_by_any_substring(vault: Vault, query: str) -> None:
    vault.store("note", "thai", THAI)
    vault.store("note", "other", "hello and thank you")
    assert found(vault, query) == ["thai"]


def test_thai_every_two_character_substring_is_found(vault: Vault) -> None:
    vault.store("note", "thai", THAI)
    word = THAI.split()[0]
    for i in range(len(word) - 1):
        assert found(vault, word[i : i + 2]) == ["thai"], word[i : i + 2]


@pytest.mark.parametrize("query", ["北京", "烤鸭", "喜欢", "京烤", "北京烤鸭"])
def test_chinese_found_by_substring(vault: Vault, query: str) -> None:
    vault.store("note", "chinese", "我喜欢北京烤鸭")
    assert found(vault, query) == ["chinese"]


@pytest.mark.parametrize("query", ["東京", "タワー", "行き", "東京タワー"])
def test_japanese_found_by_substring(vault: Vault, query: str) -> None:
    vault.store("note", "japanese", "東京タワーに行きました")
    assert found(vault, query) == ["japanese"]


@pytest.mark.parametrize("query", ["北海", "上海", "京都", "大阪", "สวัสดีค่ะ", "ลาก่อน"])
def test_substring_not_present_is_not_found(vault: Vault, query: str) -> None:
    vault.store("note", "chinese", "我喜欢北京烤鸭")
    vault.store("note", "japanese", "東京タワーに行きました")
    vault.store("note", "thai", THAI)
    assert found(vault, query) == []


def test_cjk_through_cli(vault: Vault) -> None:
    vault.store("note", "chinese", "我喜欢北京烤鸭")
    vault.store("note", "thai", THAI)
    assert keys(search_json(vault.root, "烤鸭")) == ["chinese"]
    assert keys(search_json(vault.root, "ขอบคุณ")) == ["thai"]


# --- output --------------------------------------------------------------------------------------


def test_snippet_marks_matched_word_in_bold(deploys: Vault) -> None:
    hit = deploys.search("vps1")[0]
    assert "**vps1**" in hit.snippet


def test_snippet_marks_original_form_of_folded_word(vault: Vault) -> None:
    vault.store("preference", "restaurant", "We ate at Nhà hàng Phở Hà Nội last week")
    assert "**Phở**" in vault.search("pho")[0].snippet


def test_snippet_marks_thai_substring(vault: Vault) -> None:
    vault.store("note", "thai", THAI)
    assert "**ขอบคุณ**" in vault.search("ขอบคุณ")[0].snippet


def test_search_hit_has_rank_score_and_memory(deploys: Vault) -> None:
    hits = deploys.search("docker vps1")
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert hits[0].score >= hits[-1].score > 0
    assert hits[0].memory.path == "michael/fact/vps1_server.md"


def test_search_json_objects_have_documented_fields(deploys: Vault) -> None:
    hits = search_json(deploys.root, "vps1")
    assert hits, "vps1 should be found"
    for name in ("id", "key", "category", "priority", "tags", "path", "score", "snippet", "rank"):
        assert name in hits[0], name
    first = hits[0]
    assert first["key"] == "vps1_server"
    assert first["category"] == "fact"
    assert first["priority"] == "high"
    assert first["tags"] == ["docker", "vps1"]
    assert first["path"] == "michael/fact/vps1_server.md"
    assert first["id"].startswith("mem_")
    assert isinstance(first["score"], float) and first["score"] > 0
    assert "**vps1**" in first["snippet"]


def test_search_json_scores_descend(deploys: Vault) -> None:
    scores = [h["score"] for h in search_json(deploys.root, "docker deploy vps1")]
    assert len(scores) >= 2
    assert scores == sorted(scores, reverse=True)


def test_search_text_shows_rank_ref_priority_snippet_and_path(deploys: Vault) -> None:
    lines = ok(in_vault(deploys.root, "search", "vps1")).stdout.splitlines()
    assert re.match(r"^\s*1\. fact/vps1_server\s+\(high, score [\d.]+\)$", lines[0]), lines
    assert "**vps1**" in lines[1]
    assert lines[2].strip() == "michael/fact/vps1_server.md"


def test_search_text_numbers_every_hit(deploys: Vault) -> None:
    out = ok(in_vault(deploys.root, "search", "docker")).stdout
    assert re.findall(r"^\s*(\d+)\. ", out, re.MULTILINE) == ["1", "2"]


def test_search_without_hits_exits_0_and_says_so_on_stderr(deploys: Vault) -> None:
    result = ok(in_vault(deploys.root, "search", "zeppelin"))
    assert result.stdout == ""
    assert "no memory matches" in result.stderr
    assert search_json(deploys.root, "zeppelin") == []


# --- other minds -------------------------------------------------------------------------------


def test_search_never_returns_memories_of_another_mind(vault: Vault) -> None:
    bot = Vault.init(vault.root, "bot", "Helper Bot")
    bot.store("fact", "bot_zeppelin", "the zeppelin belongs to the bot")
    vault.store("fact", "michael_zeppelin", "a zeppelin ride in Berlin")
    assert found(vault, "zeppelin") == ["michael_zeppelin"]
    assert found(bot, "zeppelin") == ["bot_zeppelin"]
    assert keys(search_json(vault.root, "zeppelin")) == ["michael_zeppelin"]


def test_search_cli_with_mind_option_searches_that_mind(vault: Vault) -> None:
    bot = Vault.init(vault.root, "bot", "Helper Bot")
    bot.store("fact", "bot_zeppelin", "the zeppelin belongs to the bot")
    vault.store("fact", "michael_zeppelin", "a zeppelin ride in Berlin")
    result = ok(run("--vault", str(vault.root), "--mind", "bot", "search", "--json", "zeppelin"))
    assert keys(json.loads(result.stdout)) == ["bot_zeppelin"]


def test_other_mind_stays_out_of_power_syntax_and_filters(vault: Vault) -> None:
    bot = Vault.init(vault.root, "bot")
    bot.store("fact", "bot_docker", "docker on the bot's host", tags=["docker"])
    vault.store("fact", "own_docker", "docker on michael's host", tags=["docker"])
    assert found(vault, "tag:docker") == ["own_docker"]
    assert found(vault, "category:fact") == ["own_docker"]
    assert found(vault, "dock*", tags=["docker"]) == ["own_docker"]


def test_by_tag_tags_and_stats_ignore_another_mind(vault: Vault) -> None:
    bot = Vault.init(vault.root, "bot")
    bot.store("fact", "bot_docker", "docker on the bot's host", tags=["docker", "bot_only"])
    vault.store("fact", "own_docker", "docker on michael's host", tags=["docker"])
    assert [m.key for m in vault.by_tag("docker")] == ["own_docker"]
    assert vault.tags() == [("docker", 1)]
    assert vault.stats()["total"] == 1


# --- by-tag --------------------------------------------------------------------------------------


def test_by_tag_lists_memories_with_the_tag_newest_first(vault: Vault) -> None:
    hand_file(vault.root, "fact", "oldest", "a", tags="docker", updated="2026-01-01T00:00:00Z")
    hand_file(vault.root, "skill", "newest", "b", tags="docker, ops", updated="2026-03-01T00:00:00Z")
    hand_file(vault.root, "note", "middle", "c", tags="docker", updated="2026-02-01T00:00:00Z")
    hand_file(vault.root, "note", "untagged", "docker in text only", updated="2026-04-01T00:00:00Z")
    assert [m.key for m in vault.by_tag("docker")] == ["newest", "middle", "oldest"]


def test_by_tag_is_case_insensitive(vault: Vault) -> None:
    hand_file(vault.root, "fact", "mixed_case", "a", tags="Docker")
    assert [m.key for m in vault.by_tag("DOCKER")] == ["mixed_case"]
    assert [m.key for m in vault.by_tag("docker")] == ["mixed_case"]


def test_by_tag_hides_expired_unless_asked(vault: Vault) -> None:
    hand_file(vault.root, "context", "gone", "a", tags="trip", expires="2020-01-01T00:00:00Z")
    assert vault.by_tag("trip") == []
    assert [m.key for m in vault.by_tag("trip", include_expired=True)] == ["gone"]


def test_by_tag_cli_newest_first_with_json(sample_copy: Path) -> None:
    expected = ["never_delete_db_volume", "postgres_backup", "docker_compose_deploy", "synapse_database", "vps1_server"]
    assert keys(json.loads(ok(in_vault(sample_copy, "by-tag", "DoCkEr", "--json")).stdout)) == expected
    lines = ok(in_vault(sample_copy, "by-tag", "docker")).stdout.splitlines()
    assert [line.split()[1] for line in lines] == [
        "mistake/never_delete_db_volume",
        "skill/postgres_backup",
        "skill/docker_compose_deploy",
        "fact/synapse_database",
        "fact/vps1_server",
    ]
    assert lines[0].startswith("2026-08-19T08:00:00Z")


def test_by_tag_cli_unknown_tag_says_so(sample_copy: Path) -> None:
    result = ok(in_vault(sample_copy, "by-tag", "nonexistent"))
    assert result.stdout == ""
    assert "nonexistent" in result.stderr
    assert json.loads(ok(in_vault(sample_copy, "by-tag", "nonexistent", "--json")).stdout) == []


# --- tags ------------------------------------------------------------------------------------------


@pytest.fixture
def tagged(vault: Vault) -> Vault:
    hand_file(vault.root, "fact", "a", "a", tags="docker, vps1, ops")
    hand_file(vault.root, "fact", "b", "b", tags="docker, ops")
    hand_file(vault.root, "fact", "c", "c", tags="docker")
    hand_file(vault.root, "fact", "d", "d", tags="zeta")
    return vault


def test_tags_counts_most_used_first(tagged: Vault) -> None:
    assert tagged.tags() == [("docker", 3), ("ops", 2), ("vps1", 1), ("zeta", 1)]


def test_tags_cli_text(tagged: Vault) -> None:
    lines = [line.split() for line in ok(in_vault(tagged.root, "tags")).stdout.splitlines()]
    assert lines == [["3", "docker"], ["2", "ops"], ["1", "vps1"], ["1", "zeta"]]


def test_tags_cli_json(tagged: Vault) -> None:
    assert json.loads(ok(in_vault(tagged.root, "tags", "--json")).stdout) == [
        {"tag": "docker", "count": 3},
        {"tag": "ops", "count": 2},
        {"tag": "vps1", "count": 1},
        {"tag": "zeta", "count": 1},
    ]


def test_tags_of_an_empty_mind(vault: Vault) -> None:
    assert vault.tags() == []
    assert json.loads(ok(in_vault(vault.root, "tags", "--json")).stdout) == []


# --- stats -----------------------------------------------------------------------------------------


@pytest.fixture
def counted(vault: Vault) -> Vault:
    vault.store("fact", "f1", "one", priority="high")
    vault.store("fact", "f2", "two", source="agent")
    vault.store("skill", "s1", "three", priority="critical", source="agent")
    hand_file(vault.root, "context", "old", "four", expires="2020-01-01T00:00:00Z", priority="low")
    return vault


def test_stats_counts(counted: Vault) -> None:
    stats = counted.stats()
    assert stats["mind"] == "michael"
    assert stats["name"] == "Michael's Mind"
    assert stats["total"] == 4
    assert stats["by_category"]["fact"] == 2
    assert stats["by_category"]["skill"] == 1
    assert stats["by_category"]["context"] == 1
    assert stats["by_category"]["identity"] == 0
    assert stats["by_priority"] == {"low": 1, "normal": 1, "high": 1, "critical": 1}
    assert stats["by_source"] == {"user": 2, "agent": 2}
    assert (stats["verified"], stats["unverified"], stats["expired"]) == (2, 2, 1)
    assert stats["unreadable_files"] == 0
    assert stats["index_bytes"] > 0
    assert stats["last_index_update"]


def test_stats_json_keys(counted: Vault) -> None:
    data = json.loads(ok(in_vault(counted.root, "stats", "--json")).stdout)
    assert {
        "mind",
        "name",
        "total",
        "by_category",
        "by_priority",
        "by_source",
        "verified",
        "unverified",
        "expired",
        "unreadable_files",
        "index_bytes",
        "last_index_update",
    } <= set(data)
    assert data["total"] == 4
    assert data["by_source"] == {"user": 2, "agent": 2}


def test_stats_cli_text(counted: Vault) -> None:
    out = ok(in_vault(counted.root, "stats")).stdout
    assert "Mind: Michael's Mind (michael)" in out
    assert "Memories: 4 (2 verified, 2 unverified, 1 expired, 0 superseded, 0 unreadable files)" in out
    assert "fact 2" in out
    assert "critical 1" in out
    assert "agent 2" in out
    assert "Index:" in out


def test_stats_counts_unreadable_files(vault: Vault) -> None:
    hand_file(vault.root, "fact", "good", "fine")
    broken = vault.root / "michael" / "fact" / "broken.md"
    broken.write_text("---\nid: mem_broken0001\ncategory: fact\nkey: a: b\n---\nbody\n", encoding="utf-8")
    stats = vault.stats()
    assert stats["total"] == 1
    assert stats["unreadable_files"] == 1


# --- NOT and fielded filters inside a loose query --------------------------------------------------


def test_not_excludes_in_a_loose_query(vault: Vault) -> None:
    vault.store("fact", "both", "redis and kafka run together")
    vault.store("fact", "redis_only", "redis alone")
    vault.store("fact", "unrelated", "nothing here at all")
    assert found(vault, "redis NOT kafka") == ["redis_only"]


def test_a_fielded_term_in_a_loose_query_is_a_filter(vault: Vault) -> None:
    vault.store("fact", "apollo_fact", "apollo landed in 1969")
    vault.store("project", "apollo_plan", "apollo rewrite of the frontend")
    vault.store("fact", "other_fact", "water boils at 100 degrees")
    assert found(vault, "apollo category:fact") == ["apollo_fact"]
