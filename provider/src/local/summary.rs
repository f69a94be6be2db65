//! What a GGUF file holds, for `foveal check` and logs: the architecture,
//! the parameter count, the quantization and the context length.

use std::fmt::Write as _;

use candle_core::quantized::{GgmlDType, gguf_file};

use super::template::ChatTemplate;

/// Facts about a model file, read from its metadata and tensor table.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSummary {
    /// `general.architecture` (`llama`, `qwen2`, …); empty when missing.
    pub architecture: String,
    /// `general.name`, when set.
    pub name: Option<String>,
    /// Parameters: the sum of the tensors' element counts.
    pub parameters: u64,
    /// Elements per tensor type (`Q4_1`, `Q8_0`, `F32`, …), most first.
    pub tensor_types: Vec<(String, u64)>,
    /// `<architecture>.context_length`: the context the model was trained
    /// for.
    pub context_length: Option<u64>,
}

impl ModelSummary {
    /// The summary of a GGUF file's header.
    pub fn from_gguf(content: &gguf_file::Content) -> Self {
        let text = |key: &str| {
            content
                .metadata
                .get(key)
                .and_then(|v| v.to_string().ok())
                .cloned()
        };
        let architecture = text("general.architecture").unwrap_or_default();
        let context_length = content
            .metadata
            .get(&format!("{architecture}.context_length"))
            .and_then(|v| v.to_u64().ok().or_else(|| v.to_u32().ok().map(u64::from)));
        let mut by_type: Vec<(String, u64)> = Vec::new();
        for info in content.tensor_infos.values() {
            let name = type_name(info.ggml_dtype);
            let count = info.shape.elem_count() as u64;
            match by_type.iter_mut().find(|(n, _)| *n == name) {
                Some((_, total)) => *total += count,
                None => by_type.push((name.to_owned(), count)),
            }
        }
        by_type.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Self {
            architecture,
            name: text("general.name"),
            parameters: by_type.iter().map(|(_, n)| n).sum(),
            tensor_types: by_type,
            context_length,
        }
    }

    /// The parameter count, short: `134.5M`, `1.5B`.
    pub fn parameters_short(&self) -> String {
        let n = self.parameters as f64;
        if n >= 1e9 {
            format!("{:.1}B", n / 1e9)
        } else if n >= 1e6 {
            format!("{:.1}M", n / 1e6)
        } else if n >= 1e3 {
            format!("{:.1}K", n / 1e3)
        } else {
            self.parameters.to_string()
        }
    }

    /// The tensor types and their shares of the parameters: `Q4_1 78.9%,
    /// Q8_0 21.0%, F32 0.03%`.
    pub fn quantization(&self) -> String {
        let mut out = String::new();
        for (i, (name, count)) in self.tensor_types.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let share = 100.0 * *count as f64 / self.parameters.max(1) as f64;
            let _ = if share >= 0.1 {
                write!(out, "{name} {share:.1}%")
            } else if share >= 0.01 {
                write!(out, "{name} {share:.2}%")
            } else {
                write!(out, "{name} <0.01%")
            };
        }
        if out.is_empty() {
            out.push_str("no tensors");
        }
        out
    }

    /// The lines `foveal check` prints for the model: architecture and
    /// parameters, quantization (and the weights' format in memory,
    /// `weights`), the context (and the one used, `context`), and the chat
    /// template.
    pub fn check_lines(
        &self,
        weights: &str,
        context: usize,
        template: &ChatTemplate,
    ) -> Vec<String> {
        vec![
            format!(
                "model: architecture {}, {} parameters ({}, the sum of the tensors' element counts)",
                self.architecture,
                self.parameters,
                self.parameters_short()
            ),
            format!(
                "model: quantization {} of the parameters (weights in memory: {weights})",
                self.quantization()
            ),
            format!(
                "model: context {} tokens in the file, {context} used",
                self.context_length
                    .map_or_else(|| "not given".to_owned(), |n| n.to_string())
            ),
            format!("model: chat template {}", template.describe()),
        ]
    }

    /// The tensor type that holds most parameters.
    pub fn main_type(&self) -> &str {
        self.tensor_types.first().map_or("-", |(name, _)| name)
    }
}

/// A tensor type as llama.cpp names it.
fn type_name(dtype: GgmlDType) -> &'static str {
    match dtype {
        GgmlDType::F32 => "F32",
        GgmlDType::F16 => "F16",
        GgmlDType::BF16 => "BF16",
        GgmlDType::Q4_0 => "Q4_0",
        GgmlDType::Q4_1 => "Q4_1",
        GgmlDType::Q5_0 => "Q5_0",
        GgmlDType::Q5_1 => "Q5_1",
        GgmlDType::Q8_0 => "Q8_0",
        GgmlDType::Q8_1 => "Q8_1",
        GgmlDType::Q2K => "Q2_K",
        GgmlDType::Q3K => "Q3_K",
        GgmlDType::Q4K => "Q4_K",
        GgmlDType::Q5K => "Q5_K",
        GgmlDType::Q6K => "Q6_K",
        GgmlDType::Q8K => "Q8_K",
    }
}
