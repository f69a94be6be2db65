//! Execution patterns (seed 004, section 3): the seed's composition
//! example, every row of its signal table, and the restrict-only property
//! of the three layers.

use foveal::execution::{
    self, AssessmentSignals, EventClass, ExecutionConfig, ExecutionMode, ExecutionPattern, Layer,
    Recommendation, TokenPressure, ToolCategory,
};
use foveal::prompt::context_types::{ContextType, ContextTypes};

/// The context type as the seed has it: foveal's defaults ask for
/// confirmation of dangerous tools in every type, the seed's ask none
/// (only its runtime signals do), and these tests check the seed's rules.
fn context(name: &str) -> ContextType {
    let mut context = ContextTypes::default().get(name).unwrap().clone();
    context.dangerous_requires_confirm = false;
    context
}

#[test]
fn foveal_asks_before_dangerous_tools_by_default_and_says_which_layer_did() {
    let tick_event = ContextTypes::default().get("tick_event").unwrap().clone();
    let pattern = execution::select(
        &ExecutionConfig::default(),
        &tick_event,
        &signals(None, 0, None),
    );
    assert!(pattern.dangerous_requires_confirm);
    assert_eq!(
        pattern.source_layers.dangerous_requires_confirm,
        Layer::Context
    );
}

fn signals(usage: Option<u8>, errors: u32, class: Option<EventClass>) -> AssessmentSignals {
    AssessmentSignals::new(usage, errors, class)
}

/// `tick_event` under the default static limits, with `signals`.
fn tick(signals: &AssessmentSignals) -> ExecutionPattern {
    execution::select(&ExecutionConfig::default(), &context("tick_event"), signals)
}

/// (mode, max_iterations, multi_tool_enabled, dangerous_requires_confirm)
fn summary(p: &ExecutionPattern) -> (ExecutionMode, u32, bool, bool) {
    (
        p.mode,
        p.max_iterations,
        p.multi_tool_enabled,
        p.dangerous_requires_confirm,
    )
}

use ExecutionMode::{PlanExecute, ReactLoop, SingleAction};

#[test]
fn the_seed_composition_example_gives_the_seed_result() {
    // static_config = {"multi_action_enabled": True, "max_iterations_per_tick": 5}
    let static_cfg = ExecutionConfig {
        multi_action_enabled: true,
        max_iterations_per_tick: 5,
        ..ExecutionConfig::default()
    };
    let pattern = execution::select(
        &static_cfg,
        &context("reflection"),
        &AssessmentSignals::default(),
    );
    assert_eq!(pattern.mode, ReactLoop);
    assert_eq!(pattern.max_iterations, 3);
    assert_eq!(pattern.source_layers.mode, Layer::Context);
    assert_eq!(pattern.source_layers.max_iterations, Layer::Context);
    assert_eq!(pattern.source_layers.multi_tool_enabled, Layer::Allowed);
    assert!(pattern.multi_tool_enabled);
    // The fields the seed's excerpt does not show.
    assert!(!pattern.sub_agents_enabled);
    assert_eq!(pattern.source_layers.sub_agents_enabled, Layer::Static);
    assert_eq!(pattern.allowed_categories, None);
    assert!(pattern.terminal_ends_loop && !pattern.dangerous_requires_confirm);

    let json = serde_json::to_value(&pattern).unwrap();
    assert_eq!(json["mode"], "react_loop");
    assert_eq!(json["max_iterations"], 3);
    assert_eq!(json["source_layers"]["mode"], "context");
    assert_eq!(json["source_layers"]["max_iterations"], "context");
    assert_eq!(json["source_layers"]["multi_tool_enabled"], "allowed");
}

#[test]
fn the_json_is_snake_case_with_lowercase_categories() {
    let mut ctx = context("tick_event");
    ctx.allowed_tool_categories = Some(vec![ToolCategory::Terminal, ToolCategory::Read]);
    let pattern = execution::select(
        &ExecutionConfig::default(),
        &ctx,
        &AssessmentSignals::default(),
    );
    assert_eq!(
        serde_json::to_value(&pattern).unwrap(),
        serde_json::json!({
            "mode": "react_loop",
            "max_iterations": 5,
            "allowed_categories": ["read", "terminal"],
            "terminal_ends_loop": true,
            "dangerous_requires_confirm": false,
            "multi_tool_enabled": true,
            "sub_agents_enabled": false,
            "source_layers": {
                "mode": "context",
                "max_iterations": "static",
                "allowed_categories": "context",
                "terminal_ends_loop": "context",
                "dangerous_requires_confirm": "allowed",
                "multi_tool_enabled": "allowed",
                "sub_agents_enabled": "static",
            }
        })
    );
    assert!(pattern.allows(ToolCategory::Read) && pattern.allows(ToolCategory::Terminal));
    assert!(!pattern.allows(ToolCategory::Write) && !pattern.allows(ToolCategory::Dangerous));
    let all = tick(&AssessmentSignals::default());
    assert!(ToolCategory::ALL.into_iter().all(|c| all.allows(c)));
}

#[test]
fn token_pressure_follows_the_usage_thresholds() {
    use TokenPressure::{Critical, High, Normal};
    let cases = [
        (None, Normal),
        (Some(0), Normal),
        (Some(59), Normal),
        (Some(60), High),
        (Some(79), High),
        (Some(80), Critical),
        (Some(100), Critical),
    ];
    for (usage, pressure) in cases {
        assert_eq!(
            TokenPressure::from_usage_percent(usage),
            pressure,
            "{usage:?}"
        );
    }
}

#[test]
fn signal_row_critical_token_pressure_forces_single_action() {
    let p = tick(&signals(Some(80), 0, None));
    assert_eq!(summary(&p), (SingleAction, 1, false, false));
    assert_eq!(p.source_layers.mode, Layer::Runtime);
    assert_eq!(p.source_layers.max_iterations, Layer::Runtime);
    assert_eq!(p.source_layers.multi_tool_enabled, Layer::Runtime);
}

#[test]
fn signal_row_high_token_pressure_allows_two_iterations() {
    let p = tick(&signals(Some(60), 0, None));
    assert_eq!(summary(&p), (ReactLoop, 2, true, false));
    assert_eq!(p.source_layers.max_iterations, Layer::Runtime);
    assert_eq!(p.source_layers.mode, Layer::Context);
    // Under 60 %: nothing changes.
    assert_eq!(
        summary(&tick(&signals(Some(59), 0, None))),
        (ReactLoop, 5, true, false)
    );
}

#[test]
fn signal_row_three_errors_force_single_action_and_confirmation() {
    let p = tick(&signals(None, 3, None));
    assert_eq!(summary(&p), (SingleAction, 1, false, true));
    assert_eq!(p.source_layers.mode, Layer::Runtime);
    assert_eq!(p.source_layers.dangerous_requires_confirm, Layer::Runtime);
    assert_eq!(
        summary(&tick(&signals(None, 7, None))),
        (SingleAction, 1, false, true)
    );
}

#[test]
fn signal_row_two_errors_allow_two_iterations() {
    let p = tick(&signals(None, 2, None));
    assert_eq!(summary(&p), (ReactLoop, 2, true, false));
    assert_eq!(p.source_layers.max_iterations, Layer::Runtime);
    // One error changes nothing.
    assert_eq!(
        summary(&tick(&signals(None, 1, None))),
        (ReactLoop, 5, true, false)
    );
}

#[test]
fn signal_row_communication_forces_single_action() {
    let p = tick(&signals(None, 0, Some(EventClass::Communication)));
    assert_eq!(summary(&p), (SingleAction, 1, false, false));
    assert_eq!(p.source_layers.mode, Layer::Runtime);
    assert_eq!(
        EventClass::for_signal(foveal_sdk::SignalKind::USER),
        Some(EventClass::Communication)
    );
    assert_eq!(
        EventClass::for_signal(foveal_sdk::SignalKind::HEARTBEAT),
        None
    );
}

#[test]
fn signal_row_building_asks_to_confirm_dangerous_tools() {
    let p = tick(&signals(None, 0, Some(EventClass::Building)));
    assert_eq!(summary(&p), (ReactLoop, 5, true, true));
    assert_eq!(p.source_layers.dangerous_requires_confirm, Layer::Runtime);
}

#[test]
fn the_models_recommendations_restrict_only_with_task_assessment_enabled() {
    let with = ExecutionConfig {
        task_assessment_enabled: true,
        ..ExecutionConfig::default()
    };
    let advise = |r: Recommendation| AssessmentSignals {
        recommendation: Some(r),
        ..AssessmentSignals::default()
    };
    let event = context("tick_event");
    let fewer = advise(Recommendation {
        recommended_iterations: Some(3),
        ..Recommendation::default()
    });
    let p = execution::select(&with, &event, &fewer);
    assert_eq!(summary(&p), (ReactLoop, 3, true, false));
    assert_eq!(p.source_layers.max_iterations, Layer::Runtime);
    // Off by default: ignored.
    let p = execution::select(&ExecutionConfig::default(), &event, &fewer);
    assert_eq!(summary(&p), (ReactLoop, 5, true, false));

    let single = advise(Recommendation {
        recommended_mode: Some(SingleAction),
        recommend_confirm_dangerous: true,
        ..Recommendation::default()
    });
    let p = execution::select(&with, &event, &single);
    assert_eq!(summary(&p), (SingleAction, 1, false, true));

    // What would widen is ignored: more iterations, another loop.
    let wider = advise(Recommendation {
        recommended_iterations: Some(9),
        recommended_mode: Some(PlanExecute),
        ..Recommendation::default()
    });
    let p = execution::select(&with, &event, &wider);
    assert_eq!(summary(&p), (ReactLoop, 5, true, false));
    assert_eq!(p.source_layers.mode, Layer::Context);
    // Zero iterations still act once.
    let zero = advise(Recommendation {
        recommended_iterations: Some(0),
        ..Recommendation::default()
    });
    assert_eq!(execution::select(&with, &event, &zero).max_iterations, 1);
}

#[test]
fn the_static_layer_caps_every_context() {
    let off = ExecutionConfig {
        multi_action_enabled: false,
        ..ExecutionConfig::default()
    };
    for t in ContextTypes::default().iter() {
        let p = execution::select(&off, t, &AssessmentSignals::default());
        assert_eq!(summary(&p), (SingleAction, 1, false, true), "{}", t.name);
        // Even goal_decompose's own single_action: the earlier layer is named.
        assert_eq!(p.source_layers.mode, Layer::Static, "{}", t.name);
        assert_eq!(p.source_layers.max_iterations, Layer::Static, "{}", t.name);
    }
    // sleep_consolidate's 10 is capped at the static 5 unless raised.
    let sleep = context("sleep_consolidate");
    let p = execution::select(
        &ExecutionConfig::default(),
        &sleep,
        &AssessmentSignals::default(),
    );
    assert_eq!(
        (p.max_iterations, p.source_layers.max_iterations),
        (5, Layer::Static)
    );
    let ten = ExecutionConfig {
        max_iterations_per_tick: 10,
        ..ExecutionConfig::default()
    };
    let p = execution::select(&ten, &sleep, &AssessmentSignals::default());
    assert_eq!(p.max_iterations, 10);
    // goal_decompose is single_action by its context.
    let p = execution::select(
        &ExecutionConfig::default(),
        &context("goal_decompose"),
        &AssessmentSignals::default(),
    );
    assert_eq!(summary(&p), (SingleAction, 1, false, false));
    assert_eq!(p.source_layers.mode, Layer::Context);
    assert_eq!(p.source_layers.max_iterations, Layer::Context);
}

#[test]
fn sub_agents_need_both_the_static_switch_and_the_context() {
    let on = ExecutionConfig {
        sub_agents_enabled: true,
        ..ExecutionConfig::default()
    };
    let none = AssessmentSignals::default();
    let p = execution::select(&on, &context("tick_event"), &none);
    assert!(p.sub_agents_enabled);
    assert_eq!(p.source_layers.sub_agents_enabled, Layer::Allowed);
    let p = execution::select(&on, &context("reflection"), &none);
    assert!(!p.sub_agents_enabled);
    assert_eq!(p.source_layers.sub_agents_enabled, Layer::Context);
    let p = execution::select(&ExecutionConfig::default(), &context("tick_event"), &none);
    assert!(!p.sub_agents_enabled);
    assert_eq!(p.source_layers.sub_agents_enabled, Layer::Static);
}

#[test]
fn a_context_that_forbids_multi_tool_is_single_action_whatever_its_mode() {
    let mut ctx = context("tick_event");
    ctx.execution_mode = PlanExecute;
    ctx.allows_multi_tool = false;
    let p = execution::select(
        &ExecutionConfig::default(),
        &ctx,
        &AssessmentSignals::default(),
    );
    assert_eq!(summary(&p), (SingleAction, 1, false, false));
    assert_eq!(p.source_layers.multi_tool_enabled, Layer::Context);
}

mod restrict_only {
    use proptest::prelude::*;

    use super::*;

    fn mode() -> impl Strategy<Value = ExecutionMode> {
        prop::sample::select(ExecutionMode::ALL.to_vec())
    }

    fn categories() -> impl Strategy<Value = Option<Vec<ToolCategory>>> {
        prop::option::of(prop::collection::vec(
            prop::sample::select(ToolCategory::ALL.to_vec()),
            0..6,
        ))
    }

    fn static_cfg() -> impl Strategy<Value = ExecutionConfig> {
        (
            any::<bool>(),
            1..=10u32,
            any::<bool>(),
            any::<bool>(),
            1..5u32,
        )
            .prop_map(|(multi, max, assess, sub, budget)| ExecutionConfig {
                multi_action_enabled: multi,
                max_iterations_per_tick: max,
                task_assessment_enabled: assess,
                sub_agents_enabled: sub,
                sub_agent_budget: budget,
            })
    }

    fn context_type() -> impl Strategy<Value = ContextType> {
        (
            prop::sample::select(foveal::prompt::context_types::NAMES.to_vec()),
            mode(),
            1..=10u32,
            categories(),
            any::<[bool; 4]>(),
        )
            .prop_map(|(name, mode, max, categories, flags)| {
                let mut t = context(name);
                t.execution_mode = mode;
                t.max_iterations = max;
                t.allowed_tool_categories = categories;
                t.terminal_ends_loop = flags[0];
                t.dangerous_requires_confirm = flags[1];
                t.allows_multi_tool = flags[2];
                t.allows_sub_agents = flags[3];
                t
            })
    }

    fn assessment() -> impl Strategy<Value = AssessmentSignals> {
        let recommendation = prop::option::of(
            (
                prop::option::of(0..12u32),
                prop::option::of(mode()),
                any::<bool>(),
            )
                .prop_map(|(iterations, mode, confirm)| Recommendation {
                    recommended_iterations: iterations,
                    recommended_mode: mode,
                    recommend_confirm_dangerous: confirm,
                }),
        );
        (
            prop::option::of(0..=100u8),
            0..6u32,
            prop::option::of(prop::sample::select(vec![
                EventClass::Communication,
                EventClass::Building,
            ])),
            recommendation,
        )
            .prop_map(|(usage, errors, class, recommendation)| AssessmentSignals {
                recommendation,
                ..AssessmentSignals::new(usage, errors, class)
            })
    }

    /// Whether `narrow` allows no category `wide` does not.
    fn categories_within(
        narrow: &Option<Vec<ToolCategory>>,
        wide: &Option<Vec<ToolCategory>>,
    ) -> bool {
        let allows =
            |set: &Option<Vec<ToolCategory>>, c| set.as_ref().is_none_or(|s| s.contains(&c));
        ToolCategory::ALL
            .into_iter()
            .all(|c| !allows(narrow, c) || allows(wide, c))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn no_layer_is_more_permissive_than_the_one_before(
            cfg in static_cfg(),
            ctx in context_type(),
            signals in assessment(),
        ) {
            let layer2 = execution::select(&cfg, &ctx, &AssessmentSignals::default());
            let layer3 = execution::select(&cfg, &ctx, &signals);

            // Layer 1 → 2: within the static limits.
            prop_assert!(layer2.max_iterations <= cfg.max_iterations_per_tick);
            prop_assert!(cfg.multi_action_enabled || !layer2.multi_tool_enabled);
            prop_assert!(cfg.multi_action_enabled || layer2.mode == SingleAction);
            prop_assert!(cfg.sub_agents_enabled || !layer2.sub_agents_enabled);

            // Layer 2: within the context's settings.
            prop_assert!(layer2.mode.is_within(ctx.execution_mode));
            prop_assert!(layer2.max_iterations <= ctx.max_iterations);
            prop_assert!(categories_within(&layer2.allowed_categories, &ctx.allowed_tool_categories));
            prop_assert!(layer2.terminal_ends_loop || !ctx.terminal_ends_loop);
            prop_assert!(layer2.dangerous_requires_confirm || !ctx.dangerous_requires_confirm);
            prop_assert!(ctx.allows_multi_tool || !layer2.multi_tool_enabled);
            prop_assert!(ctx.allows_sub_agents || !layer2.sub_agents_enabled);

            // Layer 2 → 3: every field within.
            prop_assert!(layer3.is_within(&layer2), "{layer3:?}\nwider than\n{layer2:?}");
            // ... and so within layers 1 and 2 too.
            prop_assert!(layer3.max_iterations <= cfg.max_iterations_per_tick.min(ctx.max_iterations));

            // Each signal alone restricts: dropping one never narrows.
            let without = [
                AssessmentSignals { token_pressure: TokenPressure::Normal, ..signals },
                AssessmentSignals { recent_errors: 0, ..signals },
                AssessmentSignals { event_class: None, ..signals },
                AssessmentSignals { recommendation: None, ..signals },
            ];
            for fewer in without {
                prop_assert!(layer3.is_within(&execution::select(&cfg, &ctx, &fewer)));
            }

            for p in [&layer2, &layer3] {
                // single_action is one call without a loop, and nothing else is.
                prop_assert_eq!(p.multi_tool_enabled, p.mode.is_multi_action());
                prop_assert!(p.multi_tool_enabled || p.max_iterations == 1);
                prop_assert!((1..=10).contains(&p.max_iterations));
                // "allowed" means no layer restricted it.
                let s = &p.source_layers;
                prop_assert!(s.allowed_categories != Layer::Allowed || p.allowed_categories.is_none());
                prop_assert!(s.terminal_ends_loop != Layer::Allowed || !p.terminal_ends_loop);
                prop_assert!(s.dangerous_requires_confirm != Layer::Allowed || !p.dangerous_requires_confirm);
                prop_assert!(s.multi_tool_enabled != Layer::Allowed || p.multi_tool_enabled);
                prop_assert!(s.sub_agents_enabled != Layer::Allowed || p.sub_agents_enabled);
            }
            // Without signals, no value comes from the runtime; with them,
            // a value comes from the runtime exactly when the runtime changed it.
            let s2 = &layer2.source_layers;
            prop_assert!(![s2.mode, s2.max_iterations, s2.dangerous_requires_confirm, s2.multi_tool_enabled]
                .contains(&Layer::Runtime));
            let s3 = &layer3.source_layers;
            prop_assert_eq!(s3.mode == Layer::Runtime, layer3.mode != layer2.mode);
            prop_assert_eq!(s3.max_iterations == Layer::Runtime, layer3.max_iterations != layer2.max_iterations);
            prop_assert_eq!(
                s3.dangerous_requires_confirm == Layer::Runtime,
                layer3.dangerous_requires_confirm != layer2.dangerous_requires_confirm
            );
            prop_assert_eq!(
                s3.multi_tool_enabled == Layer::Runtime,
                layer3.multi_tool_enabled != layer2.multi_tool_enabled
            );
            prop_assert_eq!(layer3.allowed_categories, layer2.allowed_categories);
            prop_assert_eq!(layer3.sub_agents_enabled, layer2.sub_agents_enabled);
            prop_assert_eq!(layer3.terminal_ends_loop, layer2.terminal_ends_loop);
        }
    }
}
