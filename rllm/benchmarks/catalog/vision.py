"""Vision-language benchmarks: images travel in ``metadata.images`` as data URLs."""

from __future__ import annotations

from rllm.benchmarks.registry import register_benchmarks
from rllm.benchmarks.types import BenchmarkSpec, Category, Need

__all__: list[str] = []

_V = Category.VISION
_NEEDS = frozenset({Need.VISION})
_MC = (
    "{question}{choices_text}\n\nIf options are given, end with 'Answer: X' (the letter); "
    "otherwise end with 'Answer: <answer>'."
)
_SHORT = "{question}\n\nAnswer with a single word or phrase, as 'Answer: <answer>'."


def _vlm(name: str, title: str, hf_id: str, fields: dict[str, str], **kw: object) -> BenchmarkSpec:
    return BenchmarkSpec(
        name=name,
        title=title,
        category=_V,
        hf_id=hf_id,
        fields=fields,
        agent="vlm",
        needs=_NEEDS,
        **kw,
    )


_IMG_QA = {"image": "image", "question": "question", "answer": "answer"}

register_benchmarks(
    _vlm(
        "mmmu",
        "MMMU",
        "MMMU/MMMU",
        {"image_1": "image_1", "question": "question", "choices": "options", "answer": "answer"},
        config="Accounting",
        split="validation",
        id_field="id",
        optional={f"image_{i}": f"image_{i}" for i in range(2, 8)}
        | {"question_type": "question_type"},
        metadata=("question_type",),
        adapter="vqa_choices",
        prompt=_MC,
        reward_fn="mcq",
        description="College-level multimodal questions over 30 subjects (config = subject).",
    ),
    _vlm(
        "mmmu_pro",
        "MMMU-Pro",
        "MMMU/MMMU_Pro",
        {"image_1": "image_1", "question": "question", "choices": "options", "answer": "answer"},
        config="standard (10 options)",
        id_field="id",
        optional={f"image_{i}": f"image_{i}" for i in range(2, 8)},
        adapter="vqa_choices",
        prompt=_MC,
        reward_fn="mcq",
        description="MMMU with 10 options and filtered questions.",
    ),
    _vlm(
        "mathvista",
        "MathVista",
        "AI4Math/MathVista",
        {"image": "decoded_image", "question": "question", "answer": "answer"},
        split="testmini",
        id_field="pid",
        optional={
            "choices": "choices",
            "question_type": "question_type",
            "answer_type": "answer_type",
        },
        metadata=("question_type", "answer_type"),
        adapter="vqa_choices",
        prompt=_MC,
        reward_fn="mcq",
        description="Mathematical reasoning in visual contexts (testmini).",
    ),
    _vlm(
        "ai2d",
        "AI2D",
        "lmms-lab/ai2d",
        {"image": "image", "question": "question", "choices": "options", "answer": "answer"},
        adapter="vqa_choices",
        prompt=_MC,
        reward_fn="mcq",
        description="Grade-school science diagrams with multiple-choice questions.",
    ),
    _vlm(
        "scienceqa_img",
        "ScienceQA (image)",
        "derek-thomas/ScienceQA",
        {"image": "image", "question": "question", "choices": "choices", "answer": "answer"},
        adapter="vqa_choices",
        prompt=_MC,
        reward_fn="mcq",
        aliases=("scienceqa",),
        optional={"hint": "hint"},
        description="Science questions with image context.",
    ),
    _vlm(
        "mmbench",
        "MMBench (en)",
        "lmms-lab/MMBench",
        {"image": "image", "question": "question", "A": "A", "B": "B", "answer": "answer"},
        config="en",
        split="dev",
        id_field="index",
        optional={"C": "C", "D": "D", "hint": "hint", "category": "category"},
        metadata=("category",),
        adapter="vqa_columns",
        prompt="{hint}\n{question}\n\n{choices_text}\n\nEnd with 'Answer: X'.",
        reward_fn="mcq",
        description="Systematic multimodal ability checks (dev split has answers).",
    ),
    _vlm(
        "mmstar",
        "MMStar",
        "Lin-Chen/MMStar",
        _IMG_QA,
        split="val",
        id_field="index",
        optional={"category": "category"},
        metadata=("category",),
        adapter="images",
        prompt="{question}\n\nEnd with 'Answer: X'.",
        reward_fn="mcq",
        description="1.5k vision-indispensable multiple-choice samples.",
    ),
    _vlm(
        "docvqa",
        "DocVQA",
        "lmms-lab/DocVQA",
        {"image": "image", "question": "question", "answer": "answers"},
        config="DocVQA",
        split="validation",
        id_field="questionId",
        adapter="images",
        prompt=_SHORT,
        reward_fn="anls",
        description="Questions on scanned documents, graded by ANLS.",
    ),
    _vlm(
        "infovqa",
        "InfographicVQA",
        "lmms-lab/DocVQA",
        {"image": "image", "question": "question", "answer": "answers"},
        config="InfographicVQA",
        split="validation",
        id_field="questionId",
        adapter="images",
        prompt=_SHORT,
        reward_fn="anls",
        aliases=("infographicvqa",),
        description="Questions on infographics, graded by ANLS.",
    ),
    _vlm(
        "chartqa",
        "ChartQA",
        "HuggingFaceM4/ChartQA",
        {"image": "image", "question": "query", "answer": "label"},
        adapter="images",
        optional={"human_or_machine": "human_or_machine"},
        metadata=("human_or_machine",),
        prompt=_SHORT,
        reward_fn="relaxed_accuracy",
        description="Chart questions; numbers within 5% count (relaxed accuracy).",
    ),
    _vlm(
        "ocrbench",
        "OCRBench",
        "echo840/OCRBench",
        _IMG_QA,
        adapter="images",
        optional={"dataset": "dataset", "question_type": "question_type"},
        metadata=("dataset", "question_type"),
        prompt=_SHORT,
        reward_fn="ocrbench",
        description="1,000 OCR questions; an answer counts when it contains a reference.",
    ),
    _vlm(
        "textvqa",
        "TextVQA",
        "lmms-lab/textvqa",
        {"image": "image", "question": "question", "answer": "answers"},
        split="validation",
        id_field="question_id",
        adapter="images",
        prompt=_SHORT,
        reward_fn="vqa_accuracy",
        description="Reading text in natural images; VQA accuracy over 10 annotators.",
    ),
    _vlm(
        "realworldqa",
        "RealWorldQA",
        "xai-org/RealworldQA",
        _IMG_QA,
        adapter="images",
        prompt="{question}",
        reward_fn="mcq",
        description="Real-world spatial questions (letters or short answers).",
    ),
)
