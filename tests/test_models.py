"""Model names, endpoints, prices, the action grammar's text and the embedded model path:
plain Python, no server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from raydist.models import (
    ACTION_REGEX,
    MissingCredentials,
    ModelEndpoint,
    UnknownModel,
    UnknownPrice,
    action_grammar,
    check_model_name,
    completion_cost,
    embedded_model_path,
    grammar_extra_body,
    register_local_model,
)
from raydist.models.endpoint import LOCAL_PLACEHOLDER_KEY
from raydist.models.pricing import price_per_token, register_price
from raydist.models.process import ModelServerError, ServerProcess


def test_unknown_provider_raises_unknown_model_naming_it():
    with pytest.raises(UnknownModel, match=r"unknown model 'nonexistent-provider/foo'.*'<provider>/<model>'"):
        check_model_name("nonexistent-provider/foo")


def test_empty_model_name_is_refused():
    with pytest.raises(UnknownModel, match="non-empty string"):
        check_model_name("  ")


def test_hosted_model_without_key_names_the_variable_not_a_value(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingCredentials, match=r"needs the environment variable\(s\) ANTHROPIC_API_KEY;"):
        check_model_name("anthropic/claude-3-5-sonnet-20241022")


def test_hosted_model_with_key_resolves_provider_and_hides_the_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    assert check_model_name("openai/gpt-4o-mini") == "openai"


def test_local_model_needs_no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert check_model_name("openai/gemma-3-270m", local=True) == "openai"


def test_endpoint_request_kwargs_carry_no_key():
    endpoint = ModelEndpoint("openai/m", api_base="http://127.0.0.1:9/v1", local=True,
                             extra_body={"grammar": "g"}, completion_kwargs={"timeout": 5})
    assert endpoint.request_kwargs() == {"timeout": 5, "api_base": "http://127.0.0.1:9/v1",
                                         "extra_body": {"grammar": "g"}}
    assert endpoint.secret_kwargs() == {"api_key": LOCAL_PLACEHOLDER_KEY}
    assert ModelEndpoint("openai/gpt-4o-mini").secret_kwargs() == {}


def test_endpoint_refuses_a_key_in_its_kwargs():
    with pytest.raises(ValueError, match="set the provider's key variable in the environment"):
        ModelEndpoint("openai/gpt-4o-mini", completion_kwargs={"api_key": "sk-x"})


def test_local_endpoint_needs_api_base():
    with pytest.raises(ValueError, match="needs an api_base"):
        ModelEndpoint("openai/m", local=True)


def test_local_models_cost_zero_and_are_registered_with_litellm():
    register_local_model("openai/raydist-test-local", context_tokens=4096)
    assert price_per_token("openai/raydist-test-local") == (0.0, 0.0)
    assert completion_cost(object(), "openai/raydist-test-local", local=True) == 0.0


def test_registered_price_is_used():
    register_price("openai/raydist-test-priced", input_per_token=1e-6, output_per_token=2e-6)
    assert price_per_token("openai/raydist-test-priced") == (1e-6, 2e-6)


def test_unknown_price_names_the_model_and_the_fix():
    with pytest.raises(UnknownPrice, match=r"'openai/raydist-never-registered'.*register_price"):
        price_per_token("openai/raydist-never-registered")


def test_negative_price_is_refused():
    with pytest.raises(ValueError, match="must be >= 0"):
        register_price("openai/x", input_per_token=-1, output_per_token=0)


def test_grammar_text_bounds_thought_and_quoted_arguments():
    assert action_grammar(max_thought_chars=10, max_command_chars=20) == (
        'root ::= "THOUGHT: " thought "\\n\\n```mswea_bash_command\\n" command "\\n```"\n'
        "thought ::= [^\\n`] [^\\n`]{0,9}\n"
        'command ::= simple ( " " op " " simple ){0,3}\n'
        'op ::= "&&" | "||" | "|" | ";"\n'
        'simple ::= word ( " " arg ){0,8} ( " " redir " " bare )?\n'
        'redir ::= ">" | ">>"\n'
        "word ::= [a-zA-Z_./] [a-zA-Z0-9_./-]{0,40}\n"
        "arg ::= bare | sq | dq\n"
        "bare ::= [a-zA-Z0-9_./:=,+%@*-] [a-zA-Z0-9_./:=,+%@*-]{0,80}\n"
        "sq ::= \"'\" [^'\\n`]{0,20} \"'\"\n"
        'dq ::= "\\"" [^"\\n`$\\\\]{0,20} "\\""\n'
    )


def test_grammar_bound_below_one_is_refused():
    with pytest.raises(ValueError, match="max_command_chars must be at least 1"):
        action_grammar(max_command_chars=0)


def test_grammar_field_by_server_kind():
    assert grammar_extra_body("llama_cpp", "G") == {"grammar": "G"}
    assert grammar_extra_body("vllm", "G") == {"structured_outputs": {"grammar": "G"}}
    assert grammar_extra_body("vllm", None) == {}
    assert grammar_extra_body("none", "G") == {}  # a server that takes no grammar gets none
    with pytest.raises(ValueError, match=r"unknown grammar server 'tgi'; use one of \['llama_cpp', 'none', 'vllm'\]"):
        grammar_extra_body("tgi", "G")


def test_action_regex_extracts_the_one_command():
    text = "THOUGHT: look\n\n```mswea_bash_command\nls -la\n```"
    assert re.findall(ACTION_REGEX, text, re.DOTALL) == ["ls -la"]


def test_embedded_model_path_is_the_assembled_gguf(tmp_path):
    path = Path(embedded_model_path(tmp_path))
    assert path.name == "gemma-3-270m-q4_k_m.gguf"
    assert path.read_bytes()[:4] == b"GGUF"
    assert (tmp_path / "gemma-3-270m-q4_k_m.gguf.verified").read_text().strip() == (
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    )
    assert embedded_model_path(tmp_path) == str(path)


def test_the_embedded_model_identity_is_that_of_its_assembled_weights_without_assembling_them(tmp_path):
    from raydist._util.hashing import file_sha256, stable_hash
    from raydist.cluster.served import model_identity

    entry = {"litellm_model": "openai/g", "model_path": "embedded", "command": ["serve"], "grammar_server": None}
    identity = model_identity("g", entry, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()  # nothing was read or hashed
    weights = file_sha256(embedded_model_path(tmp_path / "models"))
    assert identity == stable_hash({**entry, "weights_sha256": weights})  # the unit keys of earlier runs


def test_the_shipped_server_command_runs_llama_server_and_keeps_placeholders(gemma_entry):
    from raydist.cluster.serving import server_arguments, server_command

    argv = server_command(gemma_entry)
    assert argv[:3] == ["{llama_server}", "--model", "{model_path}"]
    assert argv[argv.index("--port") + 1] == "{port}" and argv[argv.index("--chat-template") + 1] == "gemma"
    assert argv[argv.index("--alias") + 1] == "gemma3-270m"
    # two slots of 8192 tokens each: the context the agents were given with one slot before
    assert (argv[argv.index("--ctx-size") + 1], argv[argv.index("--parallel") + 1]) == ("16384", "2")
    # one compute thread per reserved CPU: more stall at llama.cpp's barrier when a core is taken
    assert (gemma_entry["num_cpus"], argv[argv.index("--threads") + 1]) == (1, "1")
    assert server_arguments("gemma3-270m", gemma_entry) == {
        "model_path": None, "host": "127.0.0.1", "startup_timeout": 180.0, "health_path": "/health",
        "liveness_path": None, "policy": {},
    }


@pytest.mark.parametrize("num_cpus, threads", [(4, "4"), (2.5, "2"), (0.5, "1"), (None, "1")])
def test_num_cpus_in_a_server_command_is_the_whole_cpus_the_entry_reserves(num_cpus, threads):
    from raydist.cluster.serving import server_command

    entry = {"command": ["{llama_server}", "--threads", "{num_cpus}", "--threads-batch={num_cpus}"],
             "num_cpus": num_cpus}
    assert server_command(entry) == ["{llama_server}", "--threads", threads, f"--threads-batch={threads}"]


def test_the_llama_server_placeholder_is_filled_on_the_serving_node(tmp_path, monkeypatch):
    from raydist.models.process import ServerProcess

    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("RAYDIST_LLAMA_SERVER", str(binary))
    argv = ServerProcess(["{llama_server}", "--port", "{port}"], port=8123).argv()
    assert argv == [str(binary), "--port", "8123"]


def test_a_node_without_llama_server_says_how_to_build_it(tmp_path, monkeypatch):
    from raydist.models.process import ModelServerError, ServerProcess

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no cached build
    monkeypatch.setenv("PATH", str(tmp_path))  # none on PATH
    monkeypatch.delenv("RAYDIST_LLAMA_SERVER", raising=False)
    with pytest.raises(ModelServerError,
                       match=r"not built on this machine .*python -m raydist.models.llama_server build"):
        ServerProcess(["{llama_server}", "--port", "{port}"], port=8123).argv()
    monkeypatch.setenv("RAYDIST_LLAMA_SERVER", str(tmp_path / "nothing"))
    with pytest.raises(ModelServerError, match=r"RAYDIST_LLAMA_SERVER=.*nothing is not an executable file"):
        ServerProcess(["{llama_server}"], port=8123).argv()


def test_a_bad_supervisor_key_of_an_entry_is_refused_naming_the_entry(gemma_entry):
    from raydist.cluster.serving import server_arguments

    with pytest.raises(ModelServerError, match=r"local_models.gemma3-270m.supervisor=\{'restarts': 3\}"):
        server_arguments("gemma3-270m", {**gemma_entry, "supervisor": {"restarts": 3}})


def test_server_command_with_unknown_placeholder_is_refused():
    with pytest.raises(ValueError, match=r"unknown placeholder 'gpu'"):
        ServerProcess(["serve", "--device", "{gpu}"], port=1).argv()


def test_server_that_exits_reports_its_log_tail():
    server = ServerProcess(["bash", "-c", "echo loading {host}:{port}; echo boom >&2; exit 3"], startup_timeout=30)
    with pytest.raises(ModelServerError,
                       match=r"(?s)exited with code 3 during startup.*loading 127\.0\.0\.1:\d+\nboom"):
        server.start()


def test_server_not_healthy_in_time_is_killed_and_reported():
    server = ServerProcess(["bash", "-c", "echo waiting; exec sleep 60"], startup_timeout=1)
    with pytest.raises(ModelServerError, match=r"(?s)was not healthy after 1 s.*waiting"):
        server.start()
    assert server.pid is None


def test_api_base_before_start_is_an_error():
    with pytest.raises(ModelServerError, match="call start"):
        _ = ServerProcess(["x"]).api_base


XEON_FLAGS = ("flags\t\t: fpu sse4_2 avx f16c fma bmi2 avx2 avx512f avx512dq avx512cd avx512bw avx512vl "
              "avx512vbmi avx512_vnni avx512_bf16 avx_vnni amx_bf16 amx_tile amx_int8\n")


def test_the_build_takes_the_cpus_instruction_sets_but_never_amx():
    from raydist.models import llama_server

    options = llama_server.cpu_options(XEON_FLAGS, "x86_64")
    assert options == ["-DGGML_NATIVE=OFF", "-DGGML_SSE42=ON", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
                       "-DGGML_F16C=ON", "-DGGML_BMI2=ON", "-DGGML_AVX_VNNI=ON", "-DGGML_AVX512=ON",
                       "-DGGML_AVX512_VBMI=ON", "-DGGML_AVX512_VNNI=ON", "-DGGML_AVX512_BF16=ON"]
    # AVX-512 needs all five of its flags; an older CPU gets AVX2 only
    assert llama_server.cpu_options("flags : sse4_2 avx avx2 fma f16c avx512f\n", "x86_64") == [
        "-DGGML_NATIVE=OFF", "-DGGML_SSE42=ON", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"]
    assert llama_server.cpu_options(XEON_FLAGS, "aarch64") == []


def test_a_cached_llama_server_is_not_built_again_and_a_missing_cmake_is_named(tmp_path, monkeypatch):
    from raydist.models import llama_server

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no cmake, no compiler
    with pytest.raises(RuntimeError, match="building llama-server needs cmake and a C\\+\\+ compiler"):
        llama_server.build()
    cached = llama_server.cache_dir() / "llama-server"
    assert cached.parent.parent == tmp_path / "raydist" / "llama-server"
    assert cached.parent.name.startswith(llama_server.LLAMA_CPP_PYTHON_VERSION + "-")
    cached.parent.mkdir(parents=True)
    cached.write_text("#!/bin/sh\n")
    cached.chmod(0o755)
    assert llama_server.build() == cached  # nothing downloaded or compiled: cmake is not even on PATH
    assert llama_server.llama_server_path() == str(cached)
