"""Vision-language benchmarks: images travel in ``metadata.images`` as data URLs."""

from __future__ import annotations

from rllm.benchmarks.registry import benchmark_kind, register_benchmarks
from rllm.benchmarks.types import Category, Need

__all__: list[str] = []

_MC = (
    "{question}{choices_text}\n\nIf options are given, end with 'Answer: X' (the letter); "
    "otherwise end with 'Answer: <answer>'."
)
_SHORT = "{question}\n\nAnswer with a single word or phrase, as 'Answer: <answer>'."


_vlm = benchmark_kind(Category.VISION, agent="vlm", needs=frozenset({Need.VISION}))
# Options (when the row has them) lettered after the question; graded as a letter.
_vlm_choices = _vlm.variant(adapter="vqa_choices", prompt=_MC, reward_fn="mcq")
_mmmu = _vlm_choices.variant(
    fields={"image_1": "image_1", "question": "question", "choices": "options", "answer": "answer"},
    id_field="id",
    optional={f"image_{i}": f"image_{i}" for i in range(2, 8)},
)
# The images and the question only.
_vlm_images = _vlm.variant(adapter="images")
_vlm_short = _vlm_images.variant(prompt=_SHORT)
_ANSWERS = {"image": "image", "question": "question", "answer": "answers"}
_docvqa = _vlm_short.variant(
    hf_id="lmms-lab/DocVQA",
    fields=_ANSWERS,
    split="validation",
    id_field="questionId",
    reward_fn="anls",
)
_IMG_QA = {"image": "image", "question": "question", "answer": "answer"}

register_benchmarks(
    _mmmu(
        "mmmu",
        "MMMU",
        "MMMU/MMMU",
        config="Accounting",
        split="validation",
        meta=("question_type",),
        description="College-level multimodal questions over 30 subjects (config = subject).",
    ),
    _mmmu(
        "mmmu_pro",
        "MMMU-Pro",
        "MMMU/MMMU_Pro",
        config="standard (10 options)",
        description="MMMU with 10 options and filtered questions.",
    ),
    _vlm_choices(
        "mathvista",
        "MathVista",
        "AI4Math/MathVista",
        {"image": "decoded_image", "question": "question", "answer": "answer"},
        split="testmini",
        id_field="pid",
        optional={"choices": "choices"},
        meta=("question_type", "answer_type"),
        description="Mathematical reasoning in visual contexts (testmini).",
    ),
    _vlm_choices(
        "ai2d",
        "AI2D",
        "lmms-lab/ai2d",
        {"image": "image", "question": "question", "choices": "options", "answer": "answer"},
        description="Grade-school science diagrams with multiple-choice questions.",
    ),
    _vlm_choices(
        "scienceqa_img",
        "ScienceQA (image)",
        "derek-thomas/ScienceQA",
        {"image": "image", "question": "question", "choices": "choices", "answer": "answer"},
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
        optional={"C": "C", "D": "D", "hint": "hint"},
        meta=("category",),
        adapter="vqa_columns",
        prompt="{hint}\n{question}\n\n{choices_text}\n\nEnd with 'Answer: X'.",
        reward_fn="mcq",
        description="Systematic multimodal ability checks (dev split has answers).",
    ),
    _vlm_images(
        "mmstar",
        "MMStar",
        "Lin-Chen/MMStar",
        _IMG_QA,
        split="val",
        id_field="index",
        meta=("category",),
        prompt="{question}\n\nEnd with 'Answer: X'.",
        reward_fn="mcq",
        description="1.5k vision-indispensable multiple-choice samples.",
    ),
    _docvqa(
        "docvqa",
        "DocVQA",
        config="DocVQA",
        description="Questions on scanned documents, graded by ANLS.",
    ),
    _docvqa(
        "infovqa",
        "InfographicVQA",
        config="InfographicVQA",
        aliases=("infographicvqa",),
        description="Questions on infographics, graded by ANLS.",
    ),
    _vlm_short(
        "chartqa",
        "ChartQA",
        "HuggingFaceM4/ChartQA",
        {"image": "image", "question": "query", "answer": "label"},
        meta=("human_or_machine",),
        reward_fn="relaxed_accuracy",
        description="Chart questions; numbers within 5% count (relaxed accuracy).",
    ),
    _vlm_short(
        "ocrbench",
        "OCRBench",
        "echo840/OCRBench",
        _IMG_QA,
        meta=("dataset", "question_type"),
        reward_fn="ocrbench",
        description="1,000 OCR questions; an answer counts when it contains a reference.",
    ),
    _vlm_short(
        "textvqa",
        "TextVQA",
        "lmms-lab/textvqa",
        _ANSWERS,
        split="validation",
        id_field="question_id",
        reward_fn="vqa_accuracy",
        description="Reading text in natural images; VQA accuracy over 10 annotators.",
    ),
    _vlm_images(
        "realworldqa",
        "RealWorldQA",
        "xai-org/RealworldQA",
        _IMG_QA,
        prompt="{question}",
        reward_fn="mcq",
        description="Real-world spatial questions (letters or short answers).",
    ),
)
