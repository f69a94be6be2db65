//! Contract 1: the IDENTITY+TOOLS prefix, cached on all five inputs.

use abi_stable::std_types::{RArc, RString};
use foveal_sdk::prompt::PrefixRequest;

/// Prefixes kept: the current one and its L2 variant (without mandates),
/// for two configurations at once (e.g. a context type with its own
/// identity beside the default).
const KEPT: usize = 4;

/// One cached prefix.
#[derive(Debug)]
struct Entry {
    inputs: [String; 5],
    text: RArc<RString>,
    tokens: Option<u32>,
}

impl Entry {
    fn matches(&self, request: &PrefixRequest<'_>) -> bool {
        // Every input, the tool belt included: the seed's sxhash of the
        // list ignored its fifth element and served a stale prefix when
        // only the tools changed.
        let [name, identity, feedback, mandates, tools] = &self.inputs;
        name.as_str() == request.assistant_name.as_str()
            && identity.as_str() == request.identity.as_str()
            && feedback.as_str() == request.feedback.as_str()
            && mandates.as_str() == request.mandates.as_str()
            && tools.as_str() == request.tools.as_str()
    }
}

/// The cache, most recently used first.
#[derive(Debug, Default)]
pub struct PrefixCache {
    entries: Vec<Entry>,
}

impl PrefixCache {
    /// The prefix for `request`, and whether the cache had it.
    pub fn get(&mut self, request: &PrefixRequest<'_>) -> (RArc<RString>, bool) {
        let (index, hit) = self.lookup(request);
        (self.entries[index].text.clone(), hit)
    }

    /// The prefix for `request` and its tokens (counted once per entry).
    pub fn get_counted(
        &mut self,
        request: &PrefixRequest<'_>,
        count: &dyn Fn(&str) -> u32,
    ) -> (RArc<RString>, u32) {
        let (index, _) = self.lookup(request);
        let entry = &mut self.entries[index];
        let tokens = *entry
            .tokens
            .get_or_insert_with(|| count(entry.text.as_str()));
        (entry.text.clone(), tokens)
    }

    /// How many prefixes are cached.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The index of the entry for `request` (moved to the front), built if
    /// missing.
    fn lookup(&mut self, request: &PrefixRequest<'_>) -> (usize, bool) {
        if let Some(i) = self.entries.iter().position(|e| e.matches(request)) {
            if i != 0 {
                let entry = self.entries.remove(i);
                self.entries.insert(0, entry);
            }
            return (0, true);
        }
        let entry = Entry {
            inputs: [
                request.assistant_name.as_str().to_owned(),
                request.identity.as_str().to_owned(),
                request.feedback.as_str().to_owned(),
                request.mandates.as_str().to_owned(),
                request.tools.as_str().to_owned(),
            ],
            text: RArc::new(RString::from(build(request))),
            tokens: None,
        };
        self.entries.insert(0, entry);
        self.entries.truncate(KEPT);
        (0, false)
    }
}

/// The prefix text: the SDK's [`foveal_sdk::prompt::prefix_text`], the
/// same function the host uses when this skill is absent. Each part on its
/// own lines, and an empty part leaves no heading — the seed glued name,
/// identity and feedback together.
pub fn build(request: &PrefixRequest<'_>) -> String {
    foveal_sdk::prompt::prefix_text(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(name: &'a str, tools: &'a str) -> PrefixRequest<'a> {
        PrefixRequest {
            assistant_name: name.into(),
            identity: "".into(),
            feedback: "".into(),
            mandates: "".into(),
            tools: tools.into(),
        }
    }

    #[test]
    fn same_inputs_hit_and_share_the_text() {
        let mut cache = PrefixCache::default();
        let (a, hit_a) = cache.get(&request("Agent", "No tools"));
        let (b, hit_b) = cache.get(&request("Agent", "No tools"));
        assert!(!hit_a && hit_b);
        assert!(std::ptr::eq(&*a, &*b));
    }

    #[test]
    fn each_input_rebuilds_the_tools_included() {
        let mut cache = PrefixCache::default();
        let (a, _) = cache.get(&request("Agent", "No tools"));
        let (b, hit) = cache.get(&request("Agent", "- noop"));
        assert!(!hit);
        assert!(b.contains("- noop") && !a.contains("- noop"));
        let (_, hit) = cache.get(&request("Bot", "- noop"));
        assert!(!hit);
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut cache = PrefixCache::default();
        for i in 0..10 {
            cache.get(&request(&i.to_string(), ""));
        }
        assert_eq!(cache.len(), KEPT);
    }
}
